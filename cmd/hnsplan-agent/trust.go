package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/sshkey"
)

const (
	trustedKeysHelp   = "accept only plans signed by one of these OpenSSH ed25519 public keys (authorized_keys form: one a line, # comments; several during a key rotation); the signature is <plan>.sig beside the plan"
	trustedKeysCMHelp = "accept only plans signed by a key listed in the ConfigMap hnsplan-system/" + planwatch.TrustedKeysName + " (key " + planwatch.TrustedKeysKey + "), watched for rotation; whoever can write it decides what is trusted: --trusted-keys on the node is stronger"
)

// readTrustedKeys reads --trusted-keys; a file that cannot be read or
// trusts nothing is a usage error: the operator asked for signed plans.
func readTrustedKeys(path string) (plan.Keyring, error) {
	ring, err := sshkey.ReadAuthorizedKeys(path)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("--trusted-keys: %w", err)}
	}
	return ring, nil
}

// startTrust returns the Trust run's plan source needs, or nil when
// plans are not authenticated (logged once, here). With the ConfigMap it
// returns its watcher, to run beside the agent; its changes are logged,
// and a ConfigMap that trusts nothing is an Event as well.
func startTrust(f *runFlags, log *slog.Logger, cs kubernetes.Interface, kc *kube.Client) (*planwatch.Trust, func(context.Context), error) {
	switch {
	case f.trustedKeys != "" && f.trustedKeysCM:
		return nil, nil, &exitError{code: exitUsage, err: errors.New("--trusted-keys and --trusted-keys-configmap: give one; a ConfigMap beside the file would let its writers add keys the file does not trust")}
	case f.trustedKeys != "":
		ring, err := readTrustedKeys(f.trustedKeys)
		if err != nil {
			return nil, nil, err
		}
		log.Info("plans must be signed", "trustedKeys", ring.String(), "from", f.trustedKeys)
		return planwatch.NewTrust(ring), nil, nil
	case f.trustedKeysCM:
		if cs == nil {
			return nil, nil, &exitError{code: exitUsage, err: errors.New("--trusted-keys-configmap needs a cluster: --kubeconfig, or run in-cluster")}
		}
		tk := &planwatch.TrustedKeys{Client: cs}
		trust := planwatch.NewTrust(nil)
		trust.Set(nil, fmt.Errorf("%s has not been read yet", tk.Source()))
		tk.Trust = trust
		tk.OnChange = func(ring plan.Keyring, why error) {
			if why != nil {
				log.Warn("no trusted keys: every plan is refused; the last good plan stays", "err", why)
				if kc != nil {
					kc.Event("Warning", "TrustedKeysInvalid", "no trusted keys, every plan is refused: "+why.Error())
				}
				return
			}
			log.Info("plans must be signed", "trustedKeys", ring.String(), "from", tk.Source())
		}
		return trust, func(ctx context.Context) { _ = tk.Run(ctx) }, nil // its error is ctx's
	}
	log.Warn("plans are not authenticated: any plan whose digest verifies is applied, whoever wrote it; sign plans (hnsplan compile --sign-key) and give --trusted-keys FILE")
	return nil, nil, nil
}
