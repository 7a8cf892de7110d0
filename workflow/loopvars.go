package workflow

import (
	"github.com/starflow/starflow/internal/expr"
)

// Loop variables: a for_each may bind its item to a name of its own (`as:
// order`). Expressions inside its body are compiled in an environment that
// declares those names (expr.Env.With), exactly as the engine evaluates
// them, so validation and execution agree.

// compile parses the template s (bare: an expression by nature, see
// expr.Env.ParseExpr) with the loop variables in scope.
func (d *decoder) compile(s string, bare bool) (*expr.Template, error) {
	env := d.opts.Expr
	if len(d.loopVars) > 0 {
		var err error
		if env, err = env.With(d.loopVars...); err != nil {
			return nil, err
		}
	}
	if bare {
		return env.ParseExpr(s)
	}
	return env.ParseTemplate(s)
}
