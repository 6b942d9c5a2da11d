/-!
# Basic facts (audit sample)

This file mentions sorry only in comments and strings: the scanner must count none of them.
/- a nested comment with sorry inside -/ still a comment: sorry
-/

namespace Sample

/-- Addition is commutative on naturals. Not proved by `sorry`. -/
theorem add_comm' (a b : Nat) : a + b = b + a := by
  exact Nat.add_comm a b   -- no sorry here

def greeting : String := "this string says sorry but is not a sorry"

def quote : Char := '"'

theorem double (n : Nat) : 2 * n = n + n := by
  omega

instance : Inhabited Nat := ⟨0⟩

end Sample
