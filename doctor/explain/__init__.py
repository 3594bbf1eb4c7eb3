"""`doctor explain`: read failed-job logs and name the cause and the fix."""
