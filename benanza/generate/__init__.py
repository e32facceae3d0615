"""Code generation: the planner decides what is benchmarked (plan), the generator writes it as a CMake
project of benchmark sources and job tables (codegen), from the API definitions (benanza.apis)."""
