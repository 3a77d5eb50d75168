"""The audit of shell: command lines and scripts parsed with bashlex, and the rules over them."""
