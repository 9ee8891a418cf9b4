//! The dependency graph of a plan: cycles (with the path that closes them), a
//! dependency-respecting order, and each task's depth (for drawing the DAG).
//!
//! Graphs are given as `(task, dependencies)` pairs in plan order; dependencies naming no
//! task are ignored here (they are reported by [`crate::plan::check`]).

use std::collections::BTreeMap;

/// A task and the tasks it depends on.
pub type Edges<'a> = [(&'a str, Vec<&'a str>)];

fn index<'a>(edges: &Edges<'a>) -> BTreeMap<&'a str, usize> {
    // A duplicated id (reported elsewhere) resolves to its first task.
    let mut at = BTreeMap::new();
    for (i, (id, _)) in edges.iter().enumerate() {
        at.entry(*id).or_insert(i);
    }
    at
}

/// Every distinct cycle found by a depth-first walk in plan order, each as the path that
/// closes it (`A → B → A`), at most `limit` of them.
pub fn cycles(edges: &Edges<'_>, limit: usize) -> Vec<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnStack,
        Done,
    }
    let at = index(edges);
    let mut mark = vec![Mark::New; edges.len()];
    let mut found: Vec<Vec<String>> = Vec::new();
    for start in 0..edges.len() {
        if mark[start] != Mark::New || found.len() >= limit {
            continue;
        }
        // An explicit stack of (node, next dependency to visit): plans can be deep.
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        mark[start] = Mark::OnStack;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            let deps = &edges[node].1;
            if *next < deps.len() {
                let dep = deps[*next];
                *next += 1;
                let Some(&d) = at.get(dep) else { continue };
                match mark[d] {
                    Mark::New => {
                        mark[d] = Mark::OnStack;
                        stack.push((d, 0));
                    }
                    Mark::OnStack if found.len() < limit => {
                        let from = stack.iter().position(|(n, _)| *n == d).unwrap_or(0);
                        let mut path: Vec<String> =
                            stack[from..].iter().map(|(n, _)| edges[*n].0.to_string()).collect();
                        path.push(edges[d].0.to_string());
                        if !found.iter().any(|c| same_cycle(c, &path)) {
                            found.push(path);
                        }
                    }
                    _ => {}
                }
            } else {
                mark[node] = Mark::Done;
                stack.pop();
            }
        }
    }
    found
}

/// Two closed paths are the same cycle when one is a rotation of the other.
fn same_cycle(a: &[String], b: &[String]) -> bool {
    let (a, b) = (&a[..a.len() - 1], &b[..b.len() - 1]);
    a.len() == b.len() && (0..a.len()).any(|r| a.iter().cycle().skip(r).take(a.len()).eq(b.iter()))
}

/// The graph by position: each task's dependencies (positions in `edges`; dependencies
/// naming no task left out), and the tasks in an order where each comes after its
/// dependencies (Kahn's algorithm, iterative, so a chain of any length is fine). Tasks on or
/// behind a cycle are not in that order.
fn sorted(edges: &Edges<'_>) -> (Vec<Vec<usize>>, Vec<usize>) {
    let at = index(edges);
    let deps: Vec<Vec<usize>> =
        edges.iter().map(|(_, ds)| ds.iter().filter_map(|d| at.get(d).copied()).collect()).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); edges.len()];
    for (n, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependents[d].push(n);
        }
    }
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..edges.len()).filter(|&n| waiting[n] == 0).collect();
    let mut order = Vec::with_capacity(edges.len());
    while let Some(n) = ready.pop() {
        order.push(n);
        for &m in &dependents[n] {
            waiting[m] -= 1;
            if waiting[m] == 0 {
                ready.push(m);
            }
        }
    }
    (deps, order)
}

/// Each task's depth: 0 without dependencies, else one more than its deepest dependency
/// (tasks on or behind a cycle count as depth 0). Keyed by task id.
pub fn depths(edges: &Edges<'_>) -> BTreeMap<String, usize> {
    let (deps, order) = sorted(edges);
    let mut depth = vec![0usize; edges.len()];
    for n in order {
        depth[n] = deps[n].iter().map(|&d| depth[d] + 1).max().unwrap_or(0);
    }
    edges.iter().zip(depth).map(|((id, _), d)| (id.to_string(), d)).collect()
}

/// The critical path: the chain of dependencies with the greatest total `weight`, first task
/// first (what bounds how soon the plan can finish when `weight` counts the work left: 1 for
/// a task still to do, 0 for one done). Empty when every weight is 0. Ties go to the first
/// dependency listed, and to the chain ending first in plan order; tasks on or behind a
/// cycle are on no path.
pub fn critical_path(edges: &Edges<'_>, weight: impl Fn(&str) -> u64) -> Vec<String> {
    let (deps, order) = sorted(edges);
    // The heaviest chain ending at each task, and the dependency it comes through.
    let mut best: Vec<u64> = vec![0; edges.len()];
    let mut through: Vec<Option<usize>> = vec![None; edges.len()];
    for n in order {
        // The first of the heaviest (`min_by_key` of the reverse keeps the first).
        through[n] = deps[n].iter().copied().min_by_key(|&d| std::cmp::Reverse(best[d]));
        best[n] = weight(edges[n].0) + through[n].map_or(0, |d| best[d]);
    }
    let Some(end) = (0..edges.len()).filter(|&n| best[n] > 0).min_by_key(|&n| std::cmp::Reverse(best[n])) else {
        return Vec::new();
    };
    let mut path = vec![edges[end].0.to_string()];
    let mut at = end;
    // A dependency adding nothing (done, with nothing undone before it) ends the path.
    while let Some(prev) = through[at].filter(|&p| best[p] > 0) {
        path.push(edges[prev].0.to_string());
        at = prev;
    }
    path.reverse();
    path
}

/// How a plan is drawn: each task's depth, and the critical path (the longest chain of
/// tasks not `finished`, first task first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    pub depths: BTreeMap<String, usize>,
    pub critical: Vec<String>,
}

impl Shape {
    pub fn is_critical(&self, id: &str) -> bool {
        self.critical.iter().any(|c| c == id)
    }
}

/// The [`Shape`] of a plan whose finished tasks `finished` picks.
pub fn shape(edges: &Edges<'_>, finished: impl Fn(&str) -> bool) -> Shape {
    Shape { depths: depths(edges), critical: critical_path(edges, |id| u64::from(!finished(id))) }
}

/// Tasks in an order where every task comes after its dependencies: by depth, then plan
/// order (cycles must be ruled out first).
pub fn order(edges: &Edges<'_>) -> Vec<String> {
    let depth = depths(edges);
    let mut ids: Vec<(usize, usize, &str)> =
        edges.iter().enumerate().map(|(i, (id, _))| (depth.get(*id).copied().unwrap_or(0), i, *id)).collect();
    ids.sort();
    ids.into_iter().map(|(_, _, id)| id.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_are_reported_with_their_path_once() {
        let edges: Vec<(&str, Vec<&str>)> =
            vec![("A", vec!["B"]), ("B", vec!["C"]), ("C", vec!["A"]), ("D", vec!["D"]), ("E", vec!["A", "missing"])];
        let found = cycles(&edges, 10);
        assert_eq!(found, vec![vec!["A", "B", "C", "A"], vec!["D", "D"]]);
        let acyclic: Vec<(&str, Vec<&str>)> = vec![("A", vec![]), ("B", vec!["A"]), ("C", vec!["A", "B"])];
        assert!(cycles(&acyclic, 10).is_empty());
    }

    #[test]
    fn a_diamond_has_depths_and_a_dependency_order() {
        let edges: Vec<(&str, Vec<&str>)> =
            vec![("D", vec!["B", "C"]), ("B", vec!["A"]), ("C", vec!["A"]), ("A", vec![])];
        let d = depths(&edges);
        assert_eq!((d["A"], d["B"], d["C"], d["D"]), (0, 1, 1, 2));
        assert_eq!(order(&edges), vec!["A", "B", "C", "D"]);
    }

    #[test]
    fn the_critical_path_is_the_heaviest_chain_of_work_left() {
        let edges: Vec<(&str, Vec<&str>)> = vec![
            ("A", vec![]),
            ("B", vec!["A"]),
            ("C", vec!["A"]),
            ("C2", vec!["C"]),
            ("D", vec!["B", "C2"]),
            ("E", vec![]),
        ];
        assert_eq!(critical_path(&edges, |_| 1), vec!["A", "C", "C2", "D"]);
        // A done: the path starts at the first task with work left.
        assert_eq!(critical_path(&edges, |id| u64::from(id != "A")), vec!["C", "C2", "D"]);
        assert!(critical_path(&edges, |_| 0).is_empty());
        let cycle: Vec<(&str, Vec<&str>)> = vec![("X", vec!["Y"]), ("Y", vec!["X"])];
        assert!(critical_path(&cycle, |_| 1).len() <= 2);
    }

    #[test]
    fn deep_chains_do_not_overflow() {
        let names: Vec<String> = (0..20_000).map(|i| format!("t{i}")).collect();
        let edges: Vec<(&str, Vec<&str>)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), if i == 0 { vec![] } else { vec![names[i - 1].as_str()] }))
            .collect();
        assert!(cycles(&edges, 5).is_empty());
        assert_eq!(depths(&edges)["t19999"], 19_999);
    }
}
