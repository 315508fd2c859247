"""The benchmark's operator for Kopf: handler for handler the same as the Kapsel guest
in bench/guest/src/lib.rs (same ids, same results, same Events).

Run by `make bench` as `kopf run --standalone -A kopf_operator.py` with KUBECONFIG set.
"""
import kopf


@kopf.index('pods')
def pods_by_namespace(namespace, name, **_):
    return {namespace: name}


@kopf.on.event('pods')
def pod_event(namespace, pods_by_namespace: kopf.Index, logger, **_):
    pods = pods_by_namespace.get(namespace, [])
    logger.debug(f"{len(pods)} pod(s) in {namespace}")


@kopf.on.create('kopf.dev', 'v1', 'kopfexamples')
def create_fn(name, patch, **_):
    patch.status['phase'] = 'Created'
    return {'message': f'created {name}'}


@kopf.on.update('kopf.dev', 'v1', 'kopfexamples')
def update_fn(diff, patch, **_):
    patch.status['phase'] = 'Updated'
    return {'changes': len(diff)}


@kopf.on.delete('kopf.dev', 'v1', 'kopfexamples')
def delete_fn(name, body, patch, **_):
    kopf.info(body, reason='Deleting', message=f'deleting {name}')
    patch.status['phase'] = 'Deleting'
    return {'message': f'deleted {name}'}
