//! CPU time read from `/proc` (Linux; 0 elsewhere), so a metric can say where its time went:
//! the whole process's, or that of its threads of one name (the SQLite store's writer).

/// The process's CPU time (user + system), in seconds.
pub(crate) fn process_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat").map_or(0.0, |stat| stat_seconds(&stat))
}

/// The CPU time (user + system) of the process's threads named `name`, in seconds.
pub(crate) fn thread_seconds(name: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0.0 };
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| comm.trim() == name)
        })
        .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
        .map(|stat| stat_seconds(&stat))
        .sum()
}

/// `utime + stime` of a `stat` line, in seconds (the kernel counts 100 ticks a second).
fn stat_seconds(stat: &str) -> f64 {
    // The command name, in parentheses, may hold spaces: count the fields after it.
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}
