from django.db import migrations
from django.db.models import OuterRef, Subquery


def holders_from_leases(apps, schema_editor):
    """A held slot names its holder, the rater of the lease it named."""
    Lease = apps.get_model("annotations", "Lease")
    Slot = apps.get_model("annotations", "Slot")
    holder = Lease.objects.filter(pk=OuterRef("lease_id")).values("rater_id")[:1]
    Slot.objects.filter(lease__isnull=False).update(rater_id=Subquery(holder))


def leases_from_holders(apps, schema_editor):
    """Back: the lease of the slot's holder on its item (a rater has one per item)."""
    Lease = apps.get_model("annotations", "Lease")
    Slot = apps.get_model("annotations", "Slot")
    lease = Lease.objects.filter(rater_id=OuterRef("rater_id"), item_id=OuterRef("item_id")).values("pk")[:1]
    Slot.objects.filter(rater__isnull=False).update(lease_id=Subquery(lease))


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0018_slot_rater"),
    ]

    operations = [
        migrations.RunPython(holders_from_leases, leases_from_holders),
    ]
