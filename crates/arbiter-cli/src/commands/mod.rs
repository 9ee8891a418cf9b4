//! One module per command.

pub mod apply;
pub mod backend;
pub mod bench;
pub mod cache;
pub mod config;
pub mod dashboard;
pub mod demo;
pub mod doctor;
pub mod drafting;
pub mod init;
pub mod intake;
pub mod mock_llm;
pub mod plan;
pub mod plan_new;
pub mod plan_output;
pub mod pr;
pub mod reference;
pub mod run;
pub mod runners;
pub mod runs;
pub mod serve;
pub mod worker;
