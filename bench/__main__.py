import sys

from .cli import main

# Client processes are spawned: they re-import this module as __mp_main__, so guard the run.
if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "spark":
        from .spark import main as spark_main

        sys.exit(spark_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "restart":
        from .restart import main as restart_main

        sys.exit(restart_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "pipeline":
        from .pipeline import main as pipeline_main

        sys.exit(pipeline_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "rebalance":
        from .rebalance import main as rebalance_main

        sys.exit(rebalance_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "endurance":
        from .endurance import main as endurance_main

        sys.exit(endurance_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "txnids":
        from .txnids import main as txnids_main

        sys.exit(txnids_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "commit":
        from .commit import main as commit_main

        sys.exit(commit_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "list-pause":
        from .list_pause import main as list_pause_main

        sys.exit(list_pause_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "preauth":
        from .preauth import main as preauth_main

        sys.exit(preauth_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "chaos-check":
        from .chaos_check import main as chaos_check_main

        sys.exit(chaos_check_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "metrics":
        from .metrics import main as metrics_main

        sys.exit(metrics_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "testing":
        from .testing import main as testing_main

        sys.exit(testing_main(sys.argv[2:]))
    sys.exit(main())
