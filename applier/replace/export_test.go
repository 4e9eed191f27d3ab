package replace

// StepIndex is stepIndex for the external tests.
var StepIndex = stepIndex
