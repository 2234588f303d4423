//! The system benchmark (DESIGN.md §6).

fn main() {}
