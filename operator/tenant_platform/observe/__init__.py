"""Watched cluster state as read-only snapshots, fed by kopf handlers (or one API listing).

Steps read these instead of listing cluster-wide objects on every reconcile.
"""
