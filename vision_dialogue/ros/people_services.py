"""people_node's services for the operator and the application: enrol, forget, list.

* `people/enrol` (Enrol): a person enrolled by the application, its own consent recorded;
* `people/forget` (Forget): by id or name; the manager is told to clear its transcripts;
* `people/list` (ListPeople): the people the store knows, as JSON.
Each answers ok and a message; a store that is away is an error in the answer, not a crash.
"""
from __future__ import annotations

import json

from vision_dialogue.application.identity.persons import IdentityError
from vision_dialogue.application.identity.records import Consent, ConsentWay
from vision_dialogue.application.identity.store import StoreError
from vision_dialogue.ros.topics import PEOPLE_ENROL_SERVICE, PEOPLE_FORGET_SERVICE, \
    PEOPLE_LIST_SERVICE
from vision_dialogue_interfaces.srv import Enrol, Forget, ListPeople


class PeopleServices:
    """The three services on `node` (a PeopleNode: its persons, store, publish, forget_person).

    `lock`: the node's lock over its persons and store.
    """

    def __init__(self, node, lock):
        self.node, self.lock = node, lock
        node.create_service(Enrol, PEOPLE_ENROL_SERVICE, self._enrol)
        node.create_service(Forget, PEOPLE_FORGET_SERVICE, self._forget)
        node.create_service(ListPeople, PEOPLE_LIST_SERVICE, self._list)

    def _enrol(self, request, response):
        try:
            with self.lock:
                if self.node.persons is None:
                    raise IdentityError("people_node is not configured")
                response.person_id = self.node.persons.enrol(
                    request.person_id, request.name.strip(), Consent(
                        ConsentWay.APPLICATION, question="the application's own",
                        answer=PEOPLE_ENROL_SERVICE))
            response.ok, response.message = True, "enrolled"
        except (IdentityError, StoreError) as e:
            response.ok, response.message = False, str(e)
        self.node.publish()
        return response

    def _forget(self, request, response):
        if not (request.person_id.strip() or request.name.strip()):
            response.ok, response.message = False, "give a person_id or a name"
            return response
        try:
            response.removed = self.node.forget_person(request.person_id.strip(),
                                                       request.name.strip())
        except StoreError as e:
            response.ok, response.message = False, str(e)
            return response
        response.ok = bool(response.removed)
        response.message = "forgotten" if response.ok else "nobody of that id or name"
        return response

    def _list(self, request, response):
        store = self.node.store
        try:
            people = [p.as_dict() for p in store.people()] if store else []
        except StoreError as e:
            people = [{"error": str(e)}]
        response.people_json = json.dumps(people)
        return response
