"""What plugin authors and our own tests reuse: fault-injecting plugins and the crash harness."""
