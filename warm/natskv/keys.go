package natskv

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// token encodes one key part as a valid, non-empty NATS subject token.
func token(s string) string { return "t" + base64.RawURLEncoding.EncodeToString([]byte(s)) }

// untoken decodes a token written by token.
func untoken(t string) (string, error) {
	if !strings.HasPrefix(t, "t") {
		return "", fmt.Errorf("key token %q does not start with t", t)
	}
	b, err := base64.RawURLEncoding.DecodeString(t[1:])
	if err != nil {
		return "", fmt.Errorf("key token %q: %w", t, err)
	}
	return string(b), nil
}

func runKey(runID string) string { return token(runID) }

func stepKey(runID string, attempt int, scope, stepID string) string {
	return token(runID) + "." + token(strconv.Itoa(attempt)) + "." + token(scope) + "." + token(stepID)
}

func progressKey(runID, scope, stepID string) string {
	return token(runID) + "." + token(scope) + "." + token(stepID)
}

func sessionKey(workspace, session, key string) string {
	return token(workspace) + "." + token(session) + "." + token(key)
}

func presenceKey(runnerID string) string { return token(runnerID) }

// runFilter selects every key of one run in the steps and progress buckets.
func runFilter(runID string) string { return token(runID) + ".>" }
