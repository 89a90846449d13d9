"""Apache Beam jobs' transforms (shipped in the wheel, so Dataflow workers get them from it)."""
