import Sample.Basic

namespace Sample

/-- A planted axiom: it makes `planted_false` provable. -/
axiom cheat : 1 = 2

theorem uses_cheat : 1 = 2 := cheat

/-- A planted sorry. -/
theorem pending_lemma (n : Nat) : n ≤ n * n := by
  sorry

example : True := trivial

end Sample
