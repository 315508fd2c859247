//! `embedded GUEST.wasm...`: runs the embedding example (see the library's docs).

use std::process::ExitCode;

fn main() -> ExitCode {
    let guests: Vec<std::path::PathBuf> = std::env::args_os().skip(1).map(Into::into).collect();
    if guests.is_empty() {
        eprintln!("usage: embedded GUEST.wasm...");
        return ExitCode::from(2);
    }
    match embedded::run(guests, 5) {
        Ok(report) => {
            println!(
                "The application created {} pods; the operator made {} handler calls.",
                report.created, report.handler_calls
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}
