"""The ground floor: errors, units, text, file limits, engine option rules and the engine startup log
reader. The standard library only; every other layer may import it, it imports none."""
