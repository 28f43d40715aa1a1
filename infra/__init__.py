"""CDK infrastructure: one construct per capability; stack.py composes them."""
