package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/starflowtype"
)

// envWakeKeys is the wake-token key ring variable ("kid:base64secret,…";
// the first signs, all verify). Unset: the key file.
const envWakeKeys = "STARFLOW_WAKE_KEYS"

// envWakeKeyFile names a file holding the key ring (one kid:base64secret
// per line, mode 0600). Unset: the file beside a SQLite database
// (PATH.wakekeys); a PostgreSQL store has none.
const envWakeKeyFile = "STARFLOW_WAKE_KEY_FILE"

// wakeKeysEnv is STARFLOW_WAKE_KEYS, checked (an error names the variable
// and the entry that is wrong), and STARFLOW_WAKE_KEY_FILE; at most one
// may be set. Both "" when neither is: the store's key file.
func wakeKeysEnv() (keys, file string, err error) {
	keys, file = os.Getenv(envWakeKeys), os.Getenv(envWakeKeyFile)
	if keys != "" && file != "" {
		return "", "", fmt.Errorf("both %s and %s are set: set one (the key ring itself, or the file holding it)", envWakeKeys, envWakeKeyFile)
	}
	if keys != "" {
		if _, err := waketoken.ParseKeys(keys); err != nil {
			return "", "", err
		}
	}
	return keys, file, nil
}

// Exit codes of `starflow wake` (the HTTP API answers 401 and 410).
const (
	exitBadPayload   = 2
	exitTokenInvalid = 3 // 401: forged, malformed, unknown key, no such wait
	exitWaitClosed   = 4 // 410: already used, woken, timed out, cancelled, or expired
)

func newWakeCmd(g *globalFlags) *cobra.Command {
	var payload string
	var lf limitFlags
	cmd := &cobra.Command{
		Use:   "wake TOKEN",
		Short: "Wake a paused run with a wake token (from a wait's notify request)",
		Long: `Wake the wait a wake token names, with a JSON payload that becomes the wait step's
output; the run is re-queued and a runner continues it. A token is single use.

The token is verified with the keys in ` + envWakeKeys + ` (the same ring the runners
sign with), or else with those of the key file: ` + envWakeKeyFile + `, or the file
beside a SQLite database (PATH.wakekeys). A PostgreSQL store keeps no key.

Exit status: 0 woken; ` + fmt.Sprint(exitBadPayload) + ` the payload is not JSON, is over --max-payload-bytes, or holds a number with no
finite value such as 1e400 (the token is not used); ` + fmt.Sprint(exitTokenInvalid) + ` the token is invalid (forged, malformed,
signed by an unknown key, or no wait of this store has it); ` + fmt.Sprint(exitWaitClosed) + ` the wait is
closed or the token expired (already used, woken, timed out or cancelled).
Nothing changes unless the exit status is 0.

With --server (or ` + envServer + `) the token is posted to the server's POST /wake/{token},
which verifies it with its own keys and needs no API key; the exit statuses are the same.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			limits, err := lf.resolve()
			if err != nil {
				return err
			}
			body, err := readPayload(payload, limits)
			if err != nil {
				return err
			}
			token := strings.TrimSpace(args[0])
			return withBackend(cmd, g, backendOptions{limits: limits, wakeKeys: true}, func(ctx context.Context, b backend) error {
				w, err := b.wake(ctx, token, body)
				var re *remoteError
				switch {
				case errors.Is(err, starflowtype.ErrPayloadInvalid):
					return &exitError{code: exitBadPayload, msg: err.Error() + "; the token was not used"}
				case errors.Is(err, starflowtype.ErrTokenInvalid) && errors.As(err, &re):
					return &exitError{code: exitTokenInvalid, msg: "token invalid " + b.where() + ": " + re.Error()}
				case errors.Is(err, starflowtype.ErrTokenInvalid):
					return &exitError{code: exitTokenInvalid, msg: "token invalid: it is malformed, altered, or signed by a key that neither " +
						envWakeKeys + " nor the key file (" + envWakeKeyFile + ", or PATH.wakekeys beside a SQLite database) holds"}
				case errors.Is(err, starflowtype.ErrNotFound):
					return &exitError{code: exitTokenInvalid, msg: "token invalid: no wait in this store has this token (is --db or --store the store of the run that sent it?)"}
				case errors.Is(err, starflowtype.ErrWaitClosed):
					return &exitError{code: exitWaitClosed, msg: "wait closed or token expired: the wait was already woken (a token works once), timed out or cancelled, or the token is past its expiry; nothing changed"}
				case err != nil:
					return err
				}
				fmt.Printf("woke wait %s (step %s) of run %s\n", w.ID, stepLabel(w), w.RunID)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&payload, "payload", "", "the wake payload: JSON, or @FILE (default null)")
	lf.register(cmd, limitsPayload)
	return remoteCommand(cmd)
}
