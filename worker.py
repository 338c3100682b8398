"""Run a curaflow worker against configured services.

    TEMPORAL_ADDRESS=127.0.0.1:7233 DATABASE_URL=postgresql://... python worker.py [--config FILE]

The worker hosts JobWorkflow and its activities (see ``curaflow/process/worker.py``). To run the
whole embedded stack instead, use ``curaflow dev``.
"""

if __name__ == "__main__":
    from curaflow.process.launch import stop_quietly_until_started

    stop_quietly_until_started()  # a stop while the worker's modules load: status 0, no traceback

    import argparse

    from curaflow.process.worker import main

    parser = argparse.ArgumentParser(description="Run a curaflow worker (JobWorkflow + activities).")
    parser.add_argument("--config", help="TOML configuration file (default: $CURAFLOW_CONFIG)")
    main(parser.parse_args().config)
