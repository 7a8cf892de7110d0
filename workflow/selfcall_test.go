package workflow

import (
	"slices"
	"testing"
)

func TestSelfCalls(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"direct", "name: recurse\nsteps:\n  - id: me\n    workflow_call: {workflow: recurse}\n", []string{"me"}},
		{"when true", "name: r\nsteps:\n  - id: me\n    when: true\n    workflow_call: {workflow: r}\n", []string{"me"}},
		{"in a try and a lane", `name: r
steps:
  - id: t
    try:
      steps:
        - id: a
          workflow_call: {workflow: r}
      catch:
        - id: c
          workflow_call: {workflow: r}
  - id: p
    parallel:
      lanes:
        x: [{id: b, workflow_call: {workflow: r}}]
`, []string{"a", "b"}},
		{"under a when", "name: r\nsteps:\n  - id: me\n    when: \"${{ input.n > 0 }}\"\n    workflow_call: {workflow: r, input: {n: \"${{ input.n - 1 }}\"}}\n", nil},
		{"in an if", "name: r\nsteps:\n  - id: i\n    if:\n      condition: \"${{ input.go }}\"\n      then: [{id: me, workflow_call: {workflow: r}}]\n", nil},
		{"another workflow", "name: r\nsteps:\n  - id: me\n    workflow_call: {workflow: other}\n", nil},
	} {
		def, err := Parse(c.name+".yaml", []byte(c.src), ParseOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []string
		for _, s := range def.SelfCalls() {
			got = append(got, s.ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: SelfCalls = %v, want %v", c.name, got, c.want)
		}
	}
}
