//! A launcher with nothing but the sandbox in it, for the sandbox's own tests (arbiter's
//! real launcher is the `arbiter` binary, which calls [`arbiter_sandbox::entry`] the same way).

#[allow(clippy::print_stderr, reason = "the usage of a launcher for tests")]
fn main() {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == arbiter_sandbox::ENTRY) {
        std::process::exit(arbiter_sandbox::entry(args.collect()));
    }
    eprintln!("usage: sandbox-launcher {} run --policy JSON -- PROGRAM [ARGS...]", arbiter_sandbox::ENTRY);
    std::process::exit(2);
}
