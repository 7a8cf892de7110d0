package statetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// keyHash is the sha256 hex of a key text, as the API stores it.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// testAPI: what state.Operator offers the HTTP API besides running
// workflows (API keys, definition listings, run id prefixes, an
// operator's session variables), and the request hash of idempotency
// receipts.
func (s *suite) testAPI(t *testing.T) {
	t.Parallel()
	t.Run("APIKeys", s.testAPIKeys)
	t.Run("DefinitionListings", s.testDefinitionListings)
	t.Run("FindRunIDs", s.testFindRunIDs)
	t.Run("OperatorSessionVars", s.testOperatorSessionVars)
	t.Run("ReceiptRequestHash", s.testReceiptRequestHash)
	t.Run("RecentRecoveries", s.testRecentRecoveries)
}

// testAPIKeys: create, list, find by hash, revoke; duplicates conflict; a
// revoked key stays listed (on request), findable and configured.
func (s *suite) testAPIKeys(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	configured := func() bool {
		t.Helper()
		ok, err := h.a.APIKeysConfigured(h.ctx())
		if err != nil {
			t.Fatalf("APIKeysConfigured: %v", err)
		}
		return ok
	}
	create := func(p *state.CreateAPIKeyParams) *starflowtype.APIKey {
		t.Helper()
		k, err := h.a.CreateAPIKey(h.ctx(), p)
		if err != nil {
			t.Fatalf("CreateAPIKey(%s): %v", p.Name, err)
		}
		return k
	}
	list := func(p *state.ListAPIKeysParams) []string {
		t.Helper()
		keys, err := h.a.ListAPIKeys(h.ctx(), p)
		if err != nil {
			t.Fatalf("ListAPIKeys(%+v): %v", p, err)
		}
		out := []string{}
		for _, k := range keys {
			out = append(out, k.Name)
		}
		return out
	}
	equal(t, "configured before any key", configured(), false)

	ci := create(&state.CreateAPIKeyParams{WorkspaceID: state.DefaultWorkspace, Role: starflowtype.RoleAdmin, Name: "ci", KeyHash: keyHash("sf_ci")})
	if _, err := uuid.Parse(ci.ID); err != nil {
		t.Errorf("generated id %q is not a uuid", ci.ID)
	}
	equal(t, "workspace", ci.WorkspaceID, state.DefaultWorkspace)
	equal(t, "env", ci.Env, "")
	equal(t, "role", ci.Role, starflowtype.RoleAdmin)
	equal(t, "name", ci.Name, "ci")
	near(t, "created_at", ci.CreatedAt, time.Now(), clockSlack)
	equal(t, "revoked_at of a new key is zero", ci.RevokedAt.IsZero(), true)
	equal(t, "configured after a key", configured(), true)

	viewerID := uuid.NewString()
	viewer := create(&state.CreateAPIKeyParams{ID: strings.ToUpper(viewerID), WorkspaceID: "acme", Env: "staging",
		Role: starflowtype.RoleViewer, Name: "dash", KeyHash: keyHash("sf_dash")})
	equal(t, "given id, canonical", viewer.ID, viewerID)
	equal(t, "env", viewer.Env, "staging")

	for what, p := range map[string]*state.CreateAPIKeyParams{
		"a hash that exists": {WorkspaceID: "other", Role: starflowtype.RoleViewer, Name: "dup", KeyHash: keyHash("sf_ci")},
		"an id that exists":  {ID: viewerID, WorkspaceID: "acme", Role: starflowtype.RoleViewer, Name: "dup", KeyHash: keyHash("sf_other")},
	} {
		_, err := h.a.CreateAPIKey(h.ctx(), p)
		wantErrIs(t, "CreateAPIKey with "+what, err, starflowtype.ErrConflict)
	}
	for what, p := range map[string]*state.CreateAPIKeyParams{
		"no workspace":        {Role: starflowtype.RoleViewer, KeyHash: keyHash("x1")},
		"an unknown role":     {WorkspaceID: "w", Role: "root", KeyHash: keyHash("x2")},
		"no role":             {WorkspaceID: "w", KeyHash: keyHash("x3")},
		"the key as its hash": {WorkspaceID: "w", Role: starflowtype.RoleViewer, KeyHash: "sf_plain_key"},
		"an upper-case hash":  {WorkspaceID: "w", Role: starflowtype.RoleViewer, KeyHash: strings.ToUpper(keyHash("x4"))},
		"an id not a uuid":    {ID: "key-1", WorkspaceID: "w", Role: starflowtype.RoleViewer, KeyHash: keyHash("x5")},
		// Workspace and env names follow starflowtype.ValidScopeName.
		"a workspace path":      {WorkspaceID: "../../x", Role: starflowtype.RoleViewer, KeyHash: keyHash("x6")},
		"a control character":   {WorkspaceID: "w\x1b[2J", Role: starflowtype.RoleViewer, KeyHash: keyHash("x7")},
		"an env that is a path": {WorkspaceID: "w", Env: "prod/eu", Role: starflowtype.RoleViewer, KeyHash: keyHash("x8")},
	} {
		_, err := h.a.CreateAPIKey(h.ctx(), p)
		wantErrIs(t, "CreateAPIKey with "+what, err, starflowtype.ErrInvalid)
	}

	equal(t, "keys, oldest first", dump(list(&state.ListAPIKeysParams{})), dump([]string{"ci", "dash"}))
	equal(t, "keys of acme", dump(list(&state.ListAPIKeysParams{WorkspaceID: "acme"})), dump([]string{"dash"}))
	equal(t, "keys of nowhere", dump(list(&state.ListAPIKeysParams{WorkspaceID: "nowhere"})), dump([]string{}))

	got, err := h.a.APIKeyByHash(h.ctx(), keyHash("sf_ci"))
	if err != nil {
		t.Fatalf("APIKeyByHash: %v", err)
	}
	equal(t, "key by hash", dump(got), dump(ci))
	_, err = h.a.APIKeyByHash(h.ctx(), keyHash("sf_unknown"))
	wantErrIs(t, "APIKeyByHash of an unknown hash", err, starflowtype.ErrNotFound)

	// Revoking: only in the key's workspace (when one is given), once.
	for what, p := range map[string]*state.RevokeAPIKeyParams{
		"in another workspace": {ID: viewerID, WorkspaceID: state.DefaultWorkspace},
		"of an unknown id":     {ID: uuid.NewString()},
		"of an id not a uuid":  {ID: "dash"},
	} {
		_, err := h.a.RevokeAPIKey(h.ctx(), p)
		wantErrIs(t, "RevokeAPIKey "+what, err, starflowtype.ErrNotFound)
	}
	equal(t, "keys after refused revocations", dump(list(&state.ListAPIKeysParams{})), dump([]string{"ci", "dash"}))
	revoked, err := h.a.RevokeAPIKey(h.ctx(), &state.RevokeAPIKeyParams{ID: viewerID, WorkspaceID: "acme"})
	if err != nil {
		t.Fatalf("RevokeAPIKey: %v", err)
	}
	near(t, "revoked_at", revoked.RevokedAt, time.Now(), clockSlack)
	equal(t, "revoked key's name", revoked.Name, "dash")
	again, err := h.a.RevokeAPIKey(h.ctx(), &state.RevokeAPIKeyParams{ID: viewerID})
	if err != nil {
		t.Fatalf("RevokeAPIKey again: %v", err)
	}
	equal(t, "revoking again keeps revoked_at", again.RevokedAt, revoked.RevokedAt)

	equal(t, "unrevoked keys", dump(list(&state.ListAPIKeysParams{})), dump([]string{"ci"}))
	equal(t, "keys, revoked included", dump(list(&state.ListAPIKeysParams{IncludeRevoked: true})), dump([]string{"ci", "dash"}))
	equal(t, "acme's unrevoked keys", dump(list(&state.ListAPIKeysParams{WorkspaceID: "acme"})), dump([]string{}))
	got, err = h.a.APIKeyByHash(h.ctx(), keyHash("sf_dash"))
	if err != nil {
		t.Fatalf("APIKeyByHash of a revoked key: %v", err)
	}
	equal(t, "revoked key by hash", dump(got), dump(revoked))

	if _, err := h.a.RevokeAPIKey(h.ctx(), &state.RevokeAPIKeyParams{ID: ci.ID}); err != nil {
		t.Fatal(err)
	}
	equal(t, "configured with every key revoked", configured(), true)
}

// testDefinitionListings: one row per workflow at its current (most
// recently applied) revision, by name; a workflow's revisions, the
// current one first.
func (s *suite) testDefinitionListings(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	put := func(ws, name, rev string) *starflowtype.Definition {
		t.Helper()
		d, err := h.a.PutDefinition(h.ctx(), &state.PutDefinitionParams{WorkspaceID: ws, Name: name, Revision: rev,
			Spec: json.RawMessage(`{"rev":"` + rev + `"}`), Source: "name: " + name + "\n"})
		if err != nil {
			t.Fatalf("PutDefinition(%s@%s): %v", name, rev, err)
		}
		return d
	}
	names := func(defs []*starflowtype.Definition, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, d := range defs {
			out = append(out, d.Name+"@"+d.Revision)
		}
		return dump(out)
	}
	listDefs := func(ws string) string {
		t.Helper()
		return names(h.a.ListDefinitions(h.ctx(), &state.ListDefinitionsParams{WorkspaceID: ws}))
	}
	listRevs := func(ws, name string) string {
		t.Helper()
		return names(h.a.ListRevisions(h.ctx(), &state.ListRevisionsParams{WorkspaceID: ws, Name: name}))
	}

	equal(t, "definitions of an empty store", listDefs(""), dump([]string{}))
	rev1 := put("", "orders", "r1")
	time.Sleep(2 * time.Millisecond) // applied_at has millisecond precision
	put("", "orders", "r2")
	put("", "billing", "b1")
	put("acme", "orders", "a1")
	equal(t, "definitions", listDefs(""), dump([]string{"billing@b1", "orders@r2"}))
	equal(t, "definitions of default", listDefs(state.DefaultWorkspace), listDefs(""))
	equal(t, "definitions of acme", listDefs("acme"), dump([]string{"orders@a1"}))
	equal(t, "revisions", listRevs("", "orders"), dump([]string{"orders@r2", "orders@r1"}))
	equal(t, "revisions of a name never applied", listRevs("", "none"), dump([]string{}))
	equal(t, "revisions in acme", listRevs("acme", "orders"), dump([]string{"orders@a1"}))

	// Re-applying r1 makes it current again.
	time.Sleep(2 * time.Millisecond)
	put("", "orders", "r1")
	equal(t, "definitions after re-applying r1", listDefs(""), dump([]string{"billing@b1", "orders@r1"}))
	equal(t, "revisions after re-applying r1", listRevs("", "orders"), dump([]string{"orders@r1", "orders@r2"}))

	defs, err := h.a.ListDefinitions(h.ctx(), &state.ListDefinitionsParams{})
	if err != nil || len(defs) != 2 {
		t.Fatalf("ListDefinitions = %v, %v", defs, err)
	}
	d := defs[1]
	equal(t, "listed id", d.ID, rev1.ID)
	equal(t, "listed workspace", d.WorkspaceID, state.DefaultWorkspace)
	equal(t, "listed source", d.Source, "name: orders\n")
	jsonEqual(t, "listed spec", d.Spec, `{"rev":"r1"}`)
	equal(t, "listed created_at (the first apply)", d.CreatedAt, rev1.CreatedAt)
}

// testFindRunIDs: a prefix of hex digits, with or without hyphens, in
// either case, names the runs whose ids start with it, in id order, in
// one workspace or any; other characters are refused.
func (s *suite) testFindRunIDs(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	const (
		id1 = "abcdef01-2345-4678-9abc-def012345678"
		id2 = "abcdef01-2345-4678-9abc-def012345679"
		id3 = "abcdef02-0000-4000-8000-000000000000"
		id4 = "abcdef01-9999-4678-9abc-def012345678" // in acme
		id5 = "00000000-0000-4000-8000-000000000001"
		id6 = "ffffffff-ffff-4fff-bfff-ffffffffffff"
	)
	for _, id := range []string{id2, id1, id3, id5, id6} {
		h.enqueue(&state.EnqueueRunParams{ID: id})
	}
	h.enqueue(&state.EnqueueRunParams{ID: id4, WorkspaceID: "acme"})
	find := func(ws, prefix string, limit int) string {
		t.Helper()
		ids, err := h.a.FindRunIDs(h.ctx(), &state.FindRunIDsParams{WorkspaceID: ws, Prefix: prefix, Limit: limit})
		if err != nil {
			t.Fatalf("FindRunIDs(%q, %q): %v", ws, prefix, err)
		}
		return dump(orEmpty(ids))
	}
	for _, c := range []struct {
		what, ws, prefix string
		limit            int
		want             []string
	}{
		{"unique", "", "abcdef02", 0, []string{id3}},
		{"ambiguous, default limit 2", "", "abcdef01", 0, []string{id1, id2}},
		{"ambiguous, limit 10", "", "abcdef01", 10, []string{id1, id2, id4}},
		{"in default", state.DefaultWorkspace, "abcdef01", 10, []string{id1, id2}},
		{"in acme", "acme", "abcdef01", 10, []string{id4}},
		{"in another workspace", "acme", "abcdef02", 0, []string{}},
		{"none", "", "abcdef03", 0, []string{}},
		{"one digit", "", "a", 10, []string{id1, id2, id4, id3}},
		{"with a hyphen", "", "abcdef01-2345", 10, []string{id1, id2}},
		{"without the hyphen", "", "abcdef012345", 10, []string{id1, id2}},
		{"past two hyphens, without them", "", "abcdef01234546789abc", 10, []string{id1, id2}},
		{"upper case", "", "ABCDEF01-2345-4678-9ABC-DEF01234567", 10, []string{id1, id2}},
		{"a whole id, upper case", "", strings.ToUpper(id2), 10, []string{id2}},
		{"a whole id without hyphens", "", strings.ReplaceAll(id1, "-", ""), 10, []string{id1}},
		{"the lowest id", "", "0000", 10, []string{id5}},
		{"the highest id", "", "ffff", 10, []string{id6}},
		{"limit 1", "", "abcdef01", 1, []string{id1}},
	} {
		equal(t, "FindRunIDs "+c.what, find(c.ws, c.prefix, c.limit), dump(c.want))
	}
	for _, bad := range []string{"", "-", "abcdefg", "abc def", "abcdef01_", "é", strings.Repeat("a", 33), id1 + "0"} {
		ids, err := h.a.FindRunIDs(h.ctx(), &state.FindRunIDsParams{Prefix: bad})
		wantErrIs(t, "FindRunIDs("+bad+")", err, starflowtype.ErrInvalid)
		if len(ids) != 0 {
			t.Errorf("FindRunIDs(%q) = %v along with an error", bad, ids)
		}
	}
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// testOperatorSessionVars: SessionSet without a run is an operator's
// write (no fence, no origin run, kept until deleted unless given a
// keep_until), which neither a run's end nor the session GC removes;
// SessionList lists a session's live variables by key; SessionDelete
// removes one.
func (s *suite) testOperatorSessionVars(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, false)
	h := s.stored(t, rec.hook)
	set := func(p *state.SessionSetParams) *starflowtype.SessionVar {
		t.Helper()
		v, err := h.a.SessionSet(h.ctx(), p)
		if err != nil {
			t.Fatalf("SessionSet(%s/%s): %v", p.SessionID, p.Key, err)
		}
		return v
	}
	keys := func(ws, session string) string {
		t.Helper()
		vars, err := h.a.SessionList(h.ctx(), &state.SessionListParams{WorkspaceID: ws, SessionID: session})
		if err != nil {
			t.Fatalf("SessionList(%s): %v", session, err)
		}
		out := []string{}
		for _, v := range vars {
			out = append(out, v.Key+"="+string(v.Value))
		}
		return dump(out)
	}

	run, l := h.startOwn(runnerA)
	h.sessionSet(run.ID, l, "s", "by-run", `1`, time.Time{})
	op := set(&state.SessionSetParams{SessionID: "s", Key: "by-operator", Value: json.RawMessage(`2`)})
	equal(t, "operator write's origin run", op.OriginRunID, "")
	equal(t, "operator write's keep_until is zero", op.KeepUntil.IsZero(), true)
	equal(t, "operator write's workspace", op.WorkspaceID, state.DefaultWorkspace)
	near(t, "operator write's updated_at", op.UpdatedAt, time.Now(), clockSlack)
	ch := rec.last(state.OpSessionSet)
	if len(ch.SessionVars) != 1 || ch.SessionVars[0].Key != "by-operator" || ch.RunID != "" {
		t.Errorf("operator write's Change: run %q, vars %s", ch.RunID, dump(ch.SessionVars))
	}
	kept := set(&state.SessionSetParams{SessionID: "s", Key: "kept", Value: json.RawMessage(`3`), KeepFor: time.Hour})
	near(t, "keep_until of KeepFor 1h", kept.KeepUntil, time.Now().Add(time.Hour), clockSlack)
	set(&state.SessionSetParams{SessionID: "s", Key: "expired", Value: json.RawMessage(`4`), KeepUntil: time.Now().Add(-time.Minute)})
	set(&state.SessionSetParams{SessionID: "other", Key: "x", Value: json.RawMessage(`5`)})
	set(&state.SessionSetParams{WorkspaceID: "acme", SessionID: "s", Key: "acme", Value: json.RawMessage(`6`)})
	// A stale lease still fences a run's write.
	_, err := h.a.SessionSet(h.ctx(), &state.SessionSetParams{SessionID: "s", Key: "stale", Value: json.RawMessage(`7`),
		RunID: run.ID, Lease: starflowtype.Lease{RunnerID: runnerA, Epoch: l.Epoch + 1}})
	wantErrIs(t, "SessionSet with a stale lease", err, starflowtype.ErrLeaseLost)

	equal(t, "session s", keys("", "s"), dump([]string{"by-operator=2", "by-run=1", "kept=3"}))
	equal(t, "session s of default", keys(state.DefaultWorkspace, "s"), keys("", "s"))
	equal(t, "session s of acme", keys("acme", "s"), dump([]string{"acme=6"}))
	equal(t, "session never written", keys("", "none"), dump([]string{}))

	// The run's end drops its own variable only; the GC only the expired.
	if _, err := h.a.OnRunComplete(h.ctx(), &state.RunCompleteParams{RunID: run.ID, Lease: l}); err != nil {
		t.Fatal(err)
	}
	if n, err := h.a.DeleteExpiredSessionVars(h.ctx(), &state.DeleteExpiredSessionVarsParams{}); err != nil || n != 1 {
		t.Fatalf("DeleteExpiredSessionVars = %d, %v; want the expired one", n, err)
	}
	equal(t, "session s after the run's end and a GC", keys("", "s"), dump([]string{"by-operator=2", "kept=3"}))
	// A run that overwrites an operator's variable makes it the run's.
	run2, l2 := h.startOwn(runnerB)
	h.sessionSet(run2.ID, l2, "other", "x", `8`, time.Time{})
	if _, err := h.a.OnRunError(h.ctx(), &state.RunErrorParams{RunID: run2.ID, Lease: l2, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	equal(t, "session other after its writer run ended", keys("", "other"), dump([]string{}))

	if err := h.a.SessionDelete(h.ctx(), &state.SessionDeleteParams{SessionID: "s", Key: "by-operator"}); err != nil {
		t.Fatalf("SessionDelete: %v", err)
	}
	ch = rec.last(state.OpSessionDelete)
	if len(ch.SessionVars) != 1 || ch.SessionVars[0].Key != "by-operator" || ch.SessionVars[0].Value != nil {
		t.Errorf("SessionDelete's Change lists %s, want the removed variable with no value", dump(ch.SessionVars))
	}
	equal(t, "session s after a delete", keys("", "s"), dump([]string{"kept=3"}))
	if h.sessionGet("s", "by-operator") != nil {
		t.Error("SessionGet found a deleted variable")
	}
	for what, p := range map[string]*state.SessionDeleteParams{
		"again":                {SessionID: "s", Key: "by-operator"},
		"of an unknown key":    {SessionID: "s", Key: "none"},
		"in another workspace": {WorkspaceID: "acme", SessionID: "s", Key: "kept"},
	} {
		wantErrIs(t, "SessionDelete "+what, h.a.SessionDelete(h.ctx(), p), starflowtype.ErrNotFound)
	}
	equal(t, "session s after refused deletes", keys("", "s"), dump([]string{"kept=3"}))
}

// testReceiptRequestHash: a repeated idempotency key answers with the
// first run when the requests agree (or either has no hash) and with
// ErrConflict, writing nothing, when both hashes are set and differ;
// concurrent duplicates too.
func (s *suite) testReceiptRequestHash(t *testing.T) {
	t.Parallel()
	h := s.stored(t)
	first := h.enqueue(&state.EnqueueRunParams{IdempotencyKey: "order-1", RequestHash: "h1"})
	for _, hash := range []string{"h1", ""} {
		again := h.enqueue(&state.EnqueueRunParams{IdempotencyKey: "order-1", RequestHash: hash})
		equal(t, "repeat with request hash "+hash, again.ID, first.ID)
	}
	r, err := h.a.EnqueueRun(h.ctx(), &state.EnqueueRunParams{WorkflowName: "wf", IdempotencyKey: "order-1", RequestHash: "h2"})
	wantErrIs(t, "repeat with another request hash", err, starflowtype.ErrConflict)
	if err != nil && (!strings.Contains(err.Error(), first.ID) || !strings.Contains(err.Error(), "different request")) {
		t.Errorf("the conflict says %q; want it to name run %s and the different request", err, first.ID)
	}
	if r != nil {
		t.Errorf("the refused repeat returned run %+v", r)
	}
	// No hash on the receipt: any request answers with its run.
	plain := h.enqueue(&state.EnqueueRunParams{IdempotencyKey: "order-2"})
	equal(t, "repeat of a receipt without a hash", h.enqueue(&state.EnqueueRunParams{IdempotencyKey: "order-2", RequestHash: "h9"}).ID, plain.ID)
	// The same key in another workspace is another receipt.
	if other := h.enqueue(&state.EnqueueRunParams{IdempotencyKey: "order-1", RequestHash: "h2", WorkspaceID: "acme"}); other.ID == first.ID {
		t.Error("a key in another workspace returned the first workspace's run")
	}

	// Concurrent duplicates of two requests: one run; every caller of its
	// request gets it, every caller of the other gets ErrConflict.
	const callers = 16
	var wg sync.WaitGroup
	ids := make([]string, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			hash := []string{"A", "B"}[i%2]
			r, err := h.a.EnqueueRun(h.ctx(), &state.EnqueueRunParams{WorkflowName: "wf", IdempotencyKey: "burst", RequestHash: hash})
			if err == nil {
				ids[i] = r.ID
			}
			errs[i] = err
		})
	}
	wg.Wait()
	won, got := map[int]bool{}, map[string]bool{}
	for i := range callers {
		switch {
		case errs[i] == nil:
			won[i%2], got[ids[i]] = true, true
		case errors.Is(errs[i], starflowtype.ErrConflict):
		default:
			t.Errorf("concurrent enqueue %d: %v", i, errs[i])
		}
	}
	if len(got) != 1 {
		t.Errorf("concurrent duplicates yielded runs %v, want one", got)
	}
	if len(won) != 1 {
		t.Fatalf("callers of %d request hashes got the run, want exactly 1: %v", len(won), errs)
	}
	for i := range callers {
		if won[i%2] != (errs[i] == nil) {
			t.Errorf("caller %d (hash %s): err = %v, but the callers of its hash %s", i, []string{"A", "B"}[i%2], errs[i],
				map[bool]string{true: "got the run", false: "conflicted"}[won[i%2]])
		}
	}
	runs, err := h.a.ListRuns(h.ctx(), &state.ListRunsParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range runs {
		if r.IdempotencyKey == "burst" {
			n++
		}
		if r.IdempotencyKey == "order-1" && r.WorkspaceID == state.DefaultWorkspace && r.ID != first.ID {
			t.Errorf("run %s was written for a repeated key", r.ID)
		}
	}
	equal(t, "runs with key burst", n, 1)
}
