"""The admission bench's operator for Kopf: the same handlers as the Kapsel guest in
examples/admission/src/lib.rs (same ids, same answers), served by Kopf's own HTTPS
server (`kopf.WebhookServer`) with the certificate the bench makes.

Run by `make bench` as `kopf run --standalone -A kopf_admission.py` with KUBECONFIG and
KOPF_ADMISSION_PORT, _CERTFILE, _PKEYFILE set. Nothing is managed: the bench sends its
AdmissionReviews to the server directly.
"""
import os

import kopf


@kopf.on.startup()
def config(settings: kopf.OperatorSettings, **_):
    settings.admission.server = kopf.WebhookServer(
        addr='127.0.0.1',
        host='127.0.0.1',
        port=int(os.environ['KOPF_ADMISSION_PORT']),
        certfile=os.environ['KOPF_ADMISSION_CERTFILE'],
        pkeyfile=os.environ['KOPF_ADMISSION_PKEYFILE'],
    )


@kopf.on.validate('kopfexamples', operations=['CREATE', 'UPDATE'])
def check_field(spec, **_):
    if spec.get('field') == 'forbidden':
        raise kopf.AdmissionError("field must not be forbidden", code=422)


@kopf.on.mutate('kopfexamples', operations=['CREATE'])
def mark_seen(patch, **_):
    patch.metadata.labels['admission.kapsel.dev/seen'] = 'yes'
