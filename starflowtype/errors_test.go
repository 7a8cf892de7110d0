package starflowtype

import (
	"errors"
	"testing"
)

func TestNotFoundKeepsItsSentence(t *testing.T) {
	t.Parallel()
	err := NotFound(errors.New(`workflow "x" is not applied`))
	if !errors.Is(err, ErrNotFound) || err.Error() != `workflow "x" is not applied` || errors.Is(err, ErrInvalid) {
		t.Errorf("NotFound: %v", err)
	}
	if NotFound(nil) != nil {
		t.Error("NotFound(nil) is not nil")
	}
}
