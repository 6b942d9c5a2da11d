import Lake
open Lake DSL

package sample

@[default_target]
lean_lib Sample
