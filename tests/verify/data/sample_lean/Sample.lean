import Sample.Basic
import Sample.Planted
