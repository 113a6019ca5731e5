from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0019_slot_rater_from_lease"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="slot", name="slot_claim_has_time"),
        migrations.RemoveField(model_name="slot", name="lease"),
        migrations.AddConstraint(
            model_name="slot",
            constraint=models.CheckConstraint(
                condition=models.Q(("rater__isnull", True), ("claimed_at__isnull", False), _connector="OR"),
                name="slot_claim_has_time",
            ),
        ),
    ]
