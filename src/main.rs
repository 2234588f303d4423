//! The `rein` command line.

fn main() {}
