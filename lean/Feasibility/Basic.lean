/-!
# Feasibility: the six decidable invariant forms

Each generated obligation is a proposition built from these definitions over `Nat` (when every
literal is non-negative) or `Int`, with decimals encoded as scaled integers. The definitions are
`abbrev`s, so `decide` sees through them to the core `Decidable` instances of `≤`, `<`, `∧`, `∨`
and `=`. The Python checker (`anchorage.invariants.expr.PREDICATES`) unfolds the same definitions;
a test compares the two texts. Core Lean 4 only, no Mathlib.
-/

namespace Feasibility

universe u
variable {α : Type u}

/-- range: `lo ≤ x ≤ hi`. -/
abbrev InRange [LE α] (lo x hi : α) : Prop := lo ≤ x ∧ x ≤ hi

/-- range with only a lower bound: `lo ≤ x`. -/
abbrev AtLeast [LE α] (lo x : α) : Prop := lo ≤ x

/-- range with only an upper bound: `x ≤ hi`. -/
abbrev AtMost [LE α] (x hi : α) : Prop := x ≤ hi

/-- ordering: `x ≤ y`. -/
abbrev Ordered [LE α] (x y : α) : Prop := x ≤ y

/-- strict ordering: `x < y`. -/
abbrev StrictlyOrdered [LT α] (x y : α) : Prop := x < y

/-- sign: `0 < x`. -/
abbrev Pos [LT α] [OfNat α 0] (x : α) : Prop := 0 < x

/-- sign: `0 ≤ x`. -/
abbrev NonNeg [LE α] [OfNat α 0] (x : α) : Prop := 0 ≤ x

/-- identity within tolerance: the (scaled) value lies in the (equally scaled) band `[lo, hi]`. -/
abbrev WithinBand [LE α] (lo v hi : α) : Prop := lo ≤ v ∧ v ≤ hi

/-- interval well-formedness: `lo ≤ hi`. -/
abbrev WellFormed [LE α] (lo hi : α) : Prop := lo ≤ hi

/-! ## Transitivity and monotonicity of the bounds (Nat and Int) -/

theorem atMost_trans {x y z : Nat} (h₁ : AtMost x y) (h₂ : AtMost y z) : AtMost x z :=
  Nat.le_trans h₁ h₂

theorem atLeast_mono {lo lo' x : Nat} (h : lo' ≤ lo) (hx : AtLeast lo x) : AtLeast lo' x :=
  Nat.le_trans h hx

theorem inRange_widen {lo lo' x hi hi' : Nat} (hl : lo' ≤ lo) (hh : hi ≤ hi')
    (hx : InRange lo x hi) : InRange lo' x hi' :=
  And.intro (Nat.le_trans hl (And.left hx)) (Nat.le_trans (And.right hx) hh)

theorem inRange_wellFormed {lo x hi : Nat} (hx : InRange lo x hi) : WellFormed lo hi :=
  Nat.le_trans (And.left hx) (And.right hx)

theorem pos_nonNeg {x : Nat} (h : Pos x) : NonNeg x :=
  Nat.le_of_lt h

theorem int_atMost_trans {x y z : Int} (h₁ : AtMost x y) (h₂ : AtMost y z) : AtMost x z :=
  Int.le_trans h₁ h₂

theorem int_atLeast_mono {lo lo' x : Int} (h : lo' ≤ lo) (hx : AtLeast lo x) : AtLeast lo' x :=
  Int.le_trans h hx

theorem int_inRange_widen {lo lo' x hi hi' : Int} (hl : lo' ≤ lo) (hh : hi ≤ hi')
    (hx : InRange lo x hi) : InRange lo' x hi' :=
  And.intro (Int.le_trans hl (And.left hx)) (Int.le_trans (And.right hx) hh)

/-! ## Smoke checks: `decide` evaluates the definitions on scaled literals -/

example : InRange (α := Nat) 0 43 1000 := by decide
example : WithinBand (α := Nat) 1980000000000 (1246266 * 1604793) 2020000000000 := by decide
example : InRange (α := Int) (-1000) (-300) 1000 := by decide
example : ¬ WithinBand (α := Nat) 1980000000000 (1406276 * 1604793) 2020000000000 := by decide

end Feasibility
