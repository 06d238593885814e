--
-- PostgreSQL database dump
--

\restrict dAxswBV03miAMsi9LJHyDewem63XhEt4HUXxPhPKggeydeuumuObaqdHQhJOgq8

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: precis_legacy; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA precis_legacy;


--
-- Name: precis_messages_are_immutable(); Type: FUNCTION; Schema: precis_legacy; Owner: -
--

CREATE FUNCTION precis_legacy.precis_messages_are_immutable() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        BEGIN RAISE EXCEPTION 'precis messages are immutable'; END $$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: conversations; Type: TABLE; Schema: precis_legacy; Owner: -
--

CREATE TABLE precis_legacy.conversations (
    id text NOT NULL,
    version bigint DEFAULT 0 NOT NULL,
    next_seq bigint DEFAULT 1 NOT NULL,
    next_position bigint DEFAULT 0 NOT NULL,
    system_prompt text DEFAULT ''::text NOT NULL,
    prompt_stale boolean DEFAULT false NOT NULL,
    created_at text NOT NULL
);


--
-- Name: events; Type: TABLE; Schema: precis_legacy; Owner: -
--

CREATE TABLE precis_legacy.events (
    row_id bigint NOT NULL,
    conversation_id text NOT NULL,
    trigger text NOT NULL,
    mode text NOT NULL,
    stats text NOT NULL,
    summary_id text NOT NULL,
    at text NOT NULL
);


--
-- Name: events_row_id_seq; Type: SEQUENCE; Schema: precis_legacy; Owner: -
--

ALTER TABLE precis_legacy.events ALTER COLUMN row_id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME precis_legacy.events_row_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: in_context; Type: TABLE; Schema: precis_legacy; Owner: -
--

CREATE TABLE precis_legacy.in_context (
    conversation_id text NOT NULL,
    "position" bigint NOT NULL,
    message_id text NOT NULL
);


--
-- Name: messages; Type: TABLE; Schema: precis_legacy; Owner: -
--

CREATE TABLE precis_legacy.messages (
    conversation_id text NOT NULL,
    seq bigint NOT NULL,
    id text NOT NULL,
    role text NOT NULL,
    content text NOT NULL,
    tool_calls text DEFAULT '[]'::text NOT NULL,
    calls_text text DEFAULT ''::text NOT NULL,
    tool_call_id text,
    kind text NOT NULL,
    pinned boolean DEFAULT false NOT NULL,
    metadata text DEFAULT '{}'::text NOT NULL,
    created_at text NOT NULL,
    reasoning text DEFAULT ''::text NOT NULL,
    images integer DEFAULT 0 NOT NULL,
    openai_extra text DEFAULT '{}'::text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, ((content || '
'::text) || calls_text))) STORED
);


--
-- Name: pins; Type: TABLE; Schema: precis_legacy; Owner: -
--

CREATE TABLE precis_legacy.pins (
    conversation_id text NOT NULL,
    message_id text NOT NULL,
    pinned boolean NOT NULL
);


--
-- Name: schema_version; Type: TABLE; Schema: precis_legacy; Owner: -
--

CREATE TABLE precis_legacy.schema_version (
    version integer NOT NULL,
    applied_at text NOT NULL
);


--
-- Data for Name: conversations; Type: TABLE DATA; Schema: precis_legacy; Owner: -
--

COPY precis_legacy.conversations (id, version, next_seq, next_position, system_prompt, prompt_stale, created_at) FROM stdin;
deploy	1	34	24	You are a careful deploy assistant for the billing team.	t	2026-11-30T22:51:45.109483Z
notes	0	6	0	You keep short meeting notes.	f	2026-11-30T22:51:45.173237Z
\.


--
-- Data for Name: events; Type: TABLE DATA; Schema: precis_legacy; Owner: -
--

COPY precis_legacy.events (row_id, conversation_id, trigger, mode, stats, summary_id, at) FROM stdin;
1	deploy	manual	sliding_window	{"trigger": "manual", "mode": "sliding_window", "context_tokens_before": 854, "context_tokens_after": 791, "context_window": 4000, "messages_count_before": 28, "messages_count_after": 20, "summarized": 9}	msg_001a22ea83487597490b0f6559aaa	2026-11-30T22:51:45.159944Z
\.


--
-- Data for Name: in_context; Type: TABLE DATA; Schema: precis_legacy; Owner: -
--

COPY precis_legacy.in_context (conversation_id, "position", message_id) FROM stdin;
deploy	0	msg_001a22ea8345e1bd0d97a3544eabe
deploy	1	msg_001a22ea83487597490b0f6559aaa
deploy	2	msg_001a22ea8346969bbff0e31f5e49b
deploy	3	msg_001a22ea8346969bbff0e31f5e49c
deploy	4	msg_001a22ea8346969bbff0e31f5e49d
deploy	5	msg_001a22ea8346969bbff0e31f5e49e
deploy	6	msg_001a22ea8346d4f7744dfa68684fe
deploy	7	msg_001a22ea8346d4f7744dfa68684ff
deploy	8	msg_001a22ea8346d4f7744dfa6868500
deploy	9	msg_001a22ea8346d4f7744dfa6868501
deploy	10	msg_001a22ea8347227da845a3a178675
deploy	11	msg_001a22ea8347227da845a3a178676
deploy	12	msg_001a22ea8347227da845a3a178677
deploy	13	msg_001a22ea8347227da845a3a178678
deploy	14	msg_001a22ea834751e0a592e9e3a3fd5
deploy	15	msg_001a22ea834751e0a592e9e3a3fd6
deploy	16	msg_001a22ea834751e0a592e9e3a3fd7
deploy	17	msg_001a22ea834751e0a592e9e3a3fd8
deploy	18	msg_001a22ea8347941c7346af14ee33f
deploy	19	msg_001a22ea834817565e76c1147edce
deploy	20	msg_001a22ea834930bdb6a3d9a735b7e
deploy	21	msg_001a22ea834930bdb6a3d9a735b7f
deploy	22	msg_001a22ea834930bdb6a3d9a735b80
deploy	23	msg_001a22ea834930bdb6a3d9a735b81
\.


--
-- Data for Name: messages; Type: TABLE DATA; Schema: precis_legacy; Owner: -
--

COPY precis_legacy.messages (conversation_id, seq, id, role, content, tool_calls, calls_text, tool_call_id, kind, pinned, metadata, created_at, reasoning, images, openai_extra) FROM stdin;
deploy	1	msg_001a22ea8345e1bd0d97a3544eabe	user	Move the billing service to the new cluster this week.	[]		\N	message	t	{"task": true}	2026-11-30T22:51:45.118757Z		0	{}
deploy	2	msg_001a22ea8345e1bd0d97a3544eabf	assistant	I will start by reading the deploy config.	[]		\N	message	f	{}	2026-11-30T22:51:45.118757Z		0	{}
deploy	3	msg_001a22ea834626e71bd9e9d387512	assistant		[["call_read_0", "read_file", "{\\"path\\": \\"deploy/0.yaml\\"}"]]	read_file {"path": "deploy/0.yaml"}	\N	message	f	{}	2026-11-30T22:51:45.122316Z		0	{}
deploy	4	msg_001a22ea834626e71bd9e9d387513	tool	replicas: 2\nport: 5433\nhost: db-internal-0\nreplicas: 2\nport: 5433\nhost: db-internal-0\nreplicas: 2\nport: 5433\nhost: db-internal-0\nreplicas: 2\nport: 5433\nhost: db-internal-0\n	[]		call_read_0	message	f	{}	2026-11-30T22:51:45.122316Z		0	{}
deploy	5	msg_001a22ea834626e71bd9e9d387514	user	Step 0: keep the billing port at 5433, please.	[]		\N	message	f	{}	2026-11-30T22:51:45.122316Z		0	{}
deploy	6	msg_001a22ea834626e71bd9e9d387515	assistant	Noted for step 0; the config looks fine.	[]		\N	message	f	{}	2026-11-30T22:51:45.122316Z		0	{}
deploy	7	msg_001a22ea8346535039b708b63375a	assistant		[["call_read_1", "read_file", "{\\"path\\": \\"deploy/1.yaml\\"}"]]	read_file {"path": "deploy/1.yaml"}	\N	message	f	{}	2026-11-30T22:51:45.125782Z		0	{}
deploy	8	msg_001a22ea8346535039b708b63375b	tool	replicas: 3\nport: 5433\nhost: db-internal-1\nreplicas: 3\nport: 5433\nhost: db-internal-1\nreplicas: 3\nport: 5433\nhost: db-internal-1\nreplicas: 3\nport: 5433\nhost: db-internal-1\n	[]		call_read_1	message	f	{}	2026-11-30T22:51:45.125782Z		0	{}
deploy	9	msg_001a22ea8346535039b708b63375c	user	Step 1: keep the billing port at 5433, please.	[]		\N	message	f	{}	2026-11-30T22:51:45.125782Z		0	{}
deploy	10	msg_001a22ea8346535039b708b63375d	assistant	Noted for step 1; the config looks fine.	[]		\N	message	f	{}	2026-11-30T22:51:45.125782Z		0	{}
deploy	11	msg_001a22ea8346969bbff0e31f5e49b	assistant		[["call_read_2", "read_file", "{\\"path\\": \\"deploy/2.yaml\\"}"]]	read_file {"path": "deploy/2.yaml"}	\N	message	f	{}	2026-11-30T22:51:45.129853Z		0	{}
deploy	12	msg_001a22ea8346969bbff0e31f5e49c	tool	replicas: 4\nport: 5433\nhost: db-internal-2\nreplicas: 4\nport: 5433\nhost: db-internal-2\nreplicas: 4\nport: 5433\nhost: db-internal-2\nreplicas: 4\nport: 5433\nhost: db-internal-2\n	[]		call_read_2	message	f	{}	2026-11-30T22:51:45.129853Z		0	{}
deploy	13	msg_001a22ea8346969bbff0e31f5e49d	user	Step 2: keep the billing port at 5433, please.	[]		\N	message	f	{}	2026-11-30T22:51:45.129853Z		0	{}
deploy	14	msg_001a22ea8346969bbff0e31f5e49e	assistant	Noted for step 2; the config looks fine.	[]		\N	message	f	{}	2026-11-30T22:51:45.129853Z		0	{}
deploy	15	msg_001a22ea8346d4f7744dfa68684fe	assistant		[["call_read_3", "read_file", "{\\"path\\": \\"deploy/3.yaml\\"}"]]	read_file {"path": "deploy/3.yaml"}	\N	message	f	{}	2026-11-30T22:51:45.133804Z		0	{}
deploy	16	msg_001a22ea8346d4f7744dfa68684ff	tool	replicas: 5\nport: 5433\nhost: db-internal-3\nreplicas: 5\nport: 5433\nhost: db-internal-3\nreplicas: 5\nport: 5433\nhost: db-internal-3\nreplicas: 5\nport: 5433\nhost: db-internal-3\n	[]		call_read_3	message	f	{}	2026-11-30T22:51:45.133804Z		0	{}
deploy	17	msg_001a22ea8346d4f7744dfa6868500	user	Step 3: keep the billing port at 5433, please.	[]		\N	message	f	{}	2026-11-30T22:51:45.133804Z		0	{}
deploy	18	msg_001a22ea8346d4f7744dfa6868501	assistant	Noted for step 3; the config looks fine.	[]		\N	message	f	{}	2026-11-30T22:51:45.133804Z		0	{}
deploy	19	msg_001a22ea8347227da845a3a178675	assistant		[["call_read_4", "read_file", "{\\"path\\": \\"deploy/4.yaml\\"}"]]	read_file {"path": "deploy/4.yaml"}	\N	message	f	{}	2026-11-30T22:51:45.138008Z		0	{}
deploy	20	msg_001a22ea8347227da845a3a178676	tool	replicas: 6\nport: 5433\nhost: db-internal-4\nreplicas: 6\nport: 5433\nhost: db-internal-4\nreplicas: 6\nport: 5433\nhost: db-internal-4\nreplicas: 6\nport: 5433\nhost: db-internal-4\n	[]		call_read_4	message	f	{}	2026-11-30T22:51:45.138008Z		0	{}
deploy	21	msg_001a22ea8347227da845a3a178677	user	Step 4: keep the billing port at 5433, please.	[]		\N	message	f	{}	2026-11-30T22:51:45.138008Z		0	{}
deploy	22	msg_001a22ea8347227da845a3a178678	assistant	Noted for step 4; the config looks fine.	[]		\N	message	f	{}	2026-11-30T22:51:45.138008Z		0	{}
deploy	23	msg_001a22ea834751e0a592e9e3a3fd5	assistant		[["call_read_5", "read_file", "{\\"path\\": \\"deploy/5.yaml\\"}"]]	read_file {"path": "deploy/5.yaml"}	\N	message	f	{}	2026-11-30T22:51:45.141810Z		0	{}
deploy	24	msg_001a22ea834751e0a592e9e3a3fd6	tool	replicas: 7\nport: 5433\nhost: db-internal-5\nreplicas: 7\nport: 5433\nhost: db-internal-5\nreplicas: 7\nport: 5433\nhost: db-internal-5\nreplicas: 7\nport: 5433\nhost: db-internal-5\n	[]		call_read_5	message	f	{}	2026-11-30T22:51:45.141810Z		0	{}
deploy	25	msg_001a22ea834751e0a592e9e3a3fd7	user	Step 5: keep the billing port at 5433, please.	[]		\N	message	f	{}	2026-11-30T22:51:45.141810Z		0	{}
deploy	26	msg_001a22ea834751e0a592e9e3a3fd8	assistant	Noted for step 5; the config looks fine.	[]		\N	message	f	{}	2026-11-30T22:51:45.141810Z		0	{}
deploy	27	msg_001a22ea8347941c7346af14ee33f	user	Never restart the database on a Friday.	[]		\N	message	f	{}	2026-11-30T22:51:45.145757Z		0	{}
deploy	28	msg_001a22ea834817565e76c1147edce	assistant	Understood: no database restarts on Fridays.	[]		\N	message	f	{"source": "legacy-fixture", "turn": 7}	2026-11-30T22:51:45.153757Z	The user set a red line about Fridays.	0	{}
deploy	29	msg_001a22ea83487597490b0f6559aaa	user	{"type":"system_alert","message":"Note: 8 messages from the beginning of the conversation have been hidden from view due to memory constraints.\\nThe following is a summary of the previous messages:\\n ## Task\\nMove the billing service to the new cluster this week.\\n## Requests\\n- Step 0: keep the billing port at 5433, please.\\n- Step 1: keep the billing port at 5433, please.\\n## Files read\\ndeploy/0.yaml, deploy/1.yaml\\n## Identifiers\\nport 5433\\n## Tool activity\\n- read_file×2\\n- → read_file(deploy/0.yaml)\\n- → read_file(deploy/1.yaml)","time":"2026-11-30T22:51:45.159691Z","compaction_stats":{"trigger":"manual","context_tokens_before":854,"context_tokens_after":791,"messages_count_before":28,"messages_count_after":20}}	[]		\N	summary	f	{"summary": "## Task\\nMove the billing service to the new cluster this week.\\n## Requests\\n- Step 0: keep the billing port at 5433, please.\\n- Step 1: keep the billing port at 5433, please.\\n## Files read\\ndeploy/0.yaml, deploy/1.yaml\\n## Identifiers\\nport 5433\\n## Tool activity\\n- read_file×2\\n- → read_file(deploy/0.yaml)\\n- → read_file(deploy/1.yaml)", "mode": "sliding_window", "summarizer": "extractive", "ledger": [{"kind": "task", "text": "Move the billing service to the new cluster this week.", "source_id": "task"}, {"kind": "identifier", "text": "5433", "source_id": "msg_001a22ea834626e71bd9e9d387513"}, {"kind": "file_read", "text": "deploy/0.yaml", "source_id": "msg_001a22ea834626e71bd9e9d387512"}, {"kind": "file_read", "text": "deploy/1.yaml", "source_id": "msg_001a22ea8346535039b708b63375a"}, {"kind": "request", "text": "Step 0: keep the billing port at 5433, please.", "source_id": "msg_001a22ea834626e71bd9e9d387514"}, {"kind": "request", "text": "Step 1: keep the billing port at 5433, please.", "source_id": "msg_001a22ea8346535039b708b63375c"}], "stats": {"trigger": "manual", "mode": "sliding_window", "context_tokens_before": 854, "context_tokens_after": 791, "context_window": 4000, "messages_count_before": 28, "messages_count_after": 20, "summarized": 9}}	2026-11-30T22:51:45.159691Z		0	{}
deploy	30	msg_001a22ea834930bdb6a3d9a735b7e	user	数据库端口是 5433，不要修改。	[]		\N	message	f	{}	2026-11-30T22:51:45.171050Z		0	{"name": "li"}
deploy	31	msg_001a22ea834930bdb6a3d9a735b7f	assistant		[["call_shell", "run_shell", "{\\"cmd\\": \\"kubectl get pods -n billing\\"}"]]	run_shell {"cmd": "kubectl get pods -n billing"}	\N	message	f	{}	2026-11-30T22:51:45.171050Z		0	{}
deploy	32	msg_001a22ea834930bdb6a3d9a735b80	tool	billing-7f9c  Running  3/3	[]		call_shell	message	f	{}	2026-11-30T22:51:45.171050Z		0	{}
deploy	33	msg_001a22ea834930bdb6a3d9a735b81	assistant	All three billing pods are running on the new cluster.	[]		\N	message	f	{}	2026-11-30T22:51:45.171050Z		0	{}
notes	1	msg_001a22ea8349d0e8c8e8315c6386d	user	Notes for the Friday sync: billing cutover is on track.	[]		\N	message	t	{"task": true}	2026-11-30T22:51:45.181819Z		0	{}
notes	2	msg_001a22ea8349d0e8c8e8315c6386e	assistant	Saved. Anything else for the notes?	[]		\N	message	f	{}	2026-11-30T22:51:45.181819Z		0	{}
notes	3	msg_001a22ea8349d0e8c8e8315c6386f	user	Add that the replicas were scaled to 3.	[]		\N	message	f	{}	2026-11-30T22:51:45.181819Z		0	{}
notes	4	msg_001a22ea834a5445293aded6bb544	assistant	Saving the notes now.	[["call_notes", "save_notes", "{\\"title\\": \\"Friday sync\\"}"]]	save_notes {"title": "Friday sync"}	\N	message	f	{}	2026-11-30T22:51:45.189834Z		0	{}
notes	5	msg_001a22ea834a5445293aded6bb545	tool	saved as notes/friday-sync.md	[]		call_notes	message	f	{}	2026-11-30T22:51:45.189834Z		0	{}
\.


--
-- Data for Name: pins; Type: TABLE DATA; Schema: precis_legacy; Owner: -
--

COPY precis_legacy.pins (conversation_id, message_id, pinned) FROM stdin;
deploy	msg_001a22ea8347941c7346af14ee33f	t
notes	msg_001a22ea8349d0e8c8e8315c6386d	t
\.


--
-- Data for Name: schema_version; Type: TABLE DATA; Schema: precis_legacy; Owner: -
--

COPY precis_legacy.schema_version (version, applied_at) FROM stdin;
1	2026-11-30T22:51:45.067567Z
2	2026-11-30T22:51:45.087459Z
\.


--
-- Name: events_row_id_seq; Type: SEQUENCE SET; Schema: precis_legacy; Owner: -
--

SELECT pg_catalog.setval('precis_legacy.events_row_id_seq', 1, true);


--
-- Name: conversations conversations_pkey; Type: CONSTRAINT; Schema: precis_legacy; Owner: -
--

ALTER TABLE ONLY precis_legacy.conversations
    ADD CONSTRAINT conversations_pkey PRIMARY KEY (id);


--
-- Name: events events_pkey; Type: CONSTRAINT; Schema: precis_legacy; Owner: -
--

ALTER TABLE ONLY precis_legacy.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (row_id);


--
-- Name: in_context in_context_pkey; Type: CONSTRAINT; Schema: precis_legacy; Owner: -
--

ALTER TABLE ONLY precis_legacy.in_context
    ADD CONSTRAINT in_context_pkey PRIMARY KEY (conversation_id, "position");


--
-- Name: messages messages_conversation_id_id_key; Type: CONSTRAINT; Schema: precis_legacy; Owner: -
--

ALTER TABLE ONLY precis_legacy.messages
    ADD CONSTRAINT messages_conversation_id_id_key UNIQUE (conversation_id, id);


--
-- Name: messages messages_pkey; Type: CONSTRAINT; Schema: precis_legacy; Owner: -
--

ALTER TABLE ONLY precis_legacy.messages
    ADD CONSTRAINT messages_pkey PRIMARY KEY (conversation_id, seq);


--
-- Name: pins pins_pkey; Type: CONSTRAINT; Schema: precis_legacy; Owner: -
--

ALTER TABLE ONLY precis_legacy.pins
    ADD CONSTRAINT pins_pkey PRIMARY KEY (conversation_id, message_id);


--
-- Name: schema_version schema_version_pkey; Type: CONSTRAINT; Schema: precis_legacy; Owner: -
--

ALTER TABLE ONLY precis_legacy.schema_version
    ADD CONSTRAINT schema_version_pkey PRIMARY KEY (version);


--
-- Name: events_by_conversation; Type: INDEX; Schema: precis_legacy; Owner: -
--

CREATE INDEX events_by_conversation ON precis_legacy.events USING btree (conversation_id, row_id);


--
-- Name: messages_trgm; Type: INDEX; Schema: precis_legacy; Owner: -
--

CREATE INDEX messages_trgm ON precis_legacy.messages USING gin ((((content || '
'::text) || calls_text)) public.gin_trgm_ops);


--
-- Name: messages_tsv; Type: INDEX; Schema: precis_legacy; Owner: -
--

CREATE INDEX messages_tsv ON precis_legacy.messages USING gin (tsv);


--
-- Name: messages messages_are_immutable; Type: TRIGGER; Schema: precis_legacy; Owner: -
--

CREATE TRIGGER messages_are_immutable BEFORE UPDATE ON precis_legacy.messages FOR EACH ROW EXECUTE FUNCTION precis_legacy.precis_messages_are_immutable();


--
-- Name: messages messages_conversation_id_fkey; Type: FK CONSTRAINT; Schema: precis_legacy; Owner: -
--

ALTER TABLE ONLY precis_legacy.messages
    ADD CONSTRAINT messages_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES precis_legacy.conversations(id);


--
-- PostgreSQL database dump complete
--

\unrestrict dAxswBV03miAMsi9LJHyDewem63XhEt4HUXxPhPKggeydeuumuObaqdHQhJOgq8

