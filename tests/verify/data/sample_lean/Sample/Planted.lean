import Sample.Basic

namespace Sample

/-- A planted axiom: it makes `planted_false` provable. -/
axiom cheat : 1 = 2

theorem uses_cheat : 1 = 2 := cheat

/-- A planted sorry. -/
theorem pending_lemma (n : Nat) : n ≤ n * n := by
  sorry

/-- Restates `Sample.add_comm'` from Basic.lean instead of reusing it (cross-file duplicate). -/
theorem comm_copy (a b : Nat) : a + b = b + a := Nat.add_comm a b

example : True := trivial

end Sample
