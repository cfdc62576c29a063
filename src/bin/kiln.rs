//! The `kiln` command line: `eval`, `rewrite`, `bench` and `dot`.
//! The logic lives in the library ([`kiln::cli`]); see `kiln --help`.

fn main() {
    std::process::exit(kiln::cli::main());
}
