from django.db import models


class BareRow(models.Model):
    """One row per request of the bare baseline: the least a vote could cost."""

    value = models.CharField(max_length=16)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.value
