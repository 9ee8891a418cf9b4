//! One module per command.

pub mod apply;
pub mod backend;
pub mod bench;
pub mod cache;
pub mod config;
pub mod dashboard;
pub mod demo;
pub mod doctor;
pub mod feature;
pub mod init;
pub mod mock_llm;
pub mod plan;
pub mod plan_output;
pub mod qa;
pub mod reference;
pub mod rules;
pub mod run;
pub mod runners;
pub mod runs;
pub mod serve;
pub mod token;
pub mod ui;
pub mod worker;
