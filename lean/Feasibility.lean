import Feasibility.Basic
