"""Job entry points: admission of a Task, starts from Temporal clients, consumer cancel, event pushes."""
