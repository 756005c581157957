//! The `stellflow` command-line tool.

fn main() {
    eprintln!("stellflow: not implemented yet");
    std::process::exit(2);
}
