//! The kiln command-line interface (a placeholder until the CLI lands).

fn main() {}
