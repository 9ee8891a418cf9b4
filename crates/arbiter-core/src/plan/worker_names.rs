//! Workers by the names people gave them. A lease names the slot that holds it,
//! `<worker id>:<slot>`; a dashboard shows `<name>:<slot>` for a registered worker, and any
//! other holder (a local `plan run`'s own slots) as it is.

use std::collections::HashMap;

/// Registered workers' names by their ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerNames(HashMap<String, String>);

impl WorkerNames {
    /// From `(id, name)` pairs.
    pub fn new(workers: impl IntoIterator<Item = (String, String)>) -> Self {
        WorkerNames(workers.into_iter().collect())
    }

    /// How a lease's holder reads for people.
    pub fn label(&self, holder: &str) -> String {
        let (id, slot) = holder.rsplit_once(':').unwrap_or((holder, ""));
        match self.0.get(id) {
            Some(name) if slot.is_empty() => name.clone(),
            Some(name) => format!("{name}:{slot}"),
            None => holder.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_workers_slot_reads_by_its_name_and_anything_else_as_it_is() {
        let names = WorkerNames::new([("w-0123".to_string(), "gpu-box-1".to_string())]);
        assert_eq!(names.label("w-0123:2"), "gpu-box-1:2");
        assert_eq!(names.label("w-0123"), "gpu-box-1");
        assert_eq!(names.label("w-9999:1"), "w-9999:1");
        assert_eq!(names.label("laptop-4242:1"), "laptop-4242:1");
        assert_eq!(WorkerNames::default().label("w-0123:2"), "w-0123:2");
    }
}
