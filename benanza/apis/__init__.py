"""One definition per library API benanza benchmarks (see docs/GENERATOR.md)."""
