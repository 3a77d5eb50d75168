"""Reading the event log and the decision log as they grow, for ``hookbus tail``."""
