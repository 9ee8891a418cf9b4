//! One module per command.

pub mod apply;
pub mod backend;
pub mod config;
pub mod init;
pub mod run;
pub mod runs;
