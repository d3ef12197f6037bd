"""Experiments that reproduce the method's published claims (`cpdecomp reproduce`)."""
