//! Test support shared by the modules' tests: real git repositories in temporary
//! directories.

use std::path::Path;

use crate::git::Git;

/// A repository at `dir` (created) holding `files` (path, content) in one commit, and that
/// commit.
pub(crate) async fn committed_repo(dir: &Path, files: &[(&str, &str)]) -> (Git, String) {
    for (path, content) in files {
        let at = dir.join(path);
        std::fs::create_dir_all(at.parent().expect("a file has a directory")).expect("create the directory");
        std::fs::write(at, content).expect("write the file");
    }
    let git = Git::new(dir.to_path_buf());
    git.run(["init", "--quiet"]).await.expect("git init");
    git.run(["add", "-A"]).await.expect("git add");
    git.run(["-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "--quiet", "-m", "base"])
        .await
        .expect("git commit");
    let base = git.resolve_commit("HEAD").await.expect("HEAD");
    (git, base)
}
