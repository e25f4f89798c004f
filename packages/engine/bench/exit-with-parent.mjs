// A benchmark's child process ends when its parent does: a parent killed (out of memory, say) would otherwise leave
// the child measuring on the cores alone, and disturb whatever runs next.
export function exitWithParent() {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) process.exit(1);
  }, 1000).unref();
}
