/*
 * weighted.pml -- a SPIN model of shmsem's weighted leases and run-time
 * capacity (libshmsem/src/grant.cc, waiter.cc, release.cc, recovery.cc,
 * capacity.cc, reclaim.cc).
 *
 * What each part stands for, what is abstracted and why, and what is
 * checked: verify/MODEL.md, "The weighted model". Run: verify/run.sh
 * (configurations w-*). The commit and layout version the models match:
 * verify/MODEL.md, "What the models match".
 *
 * Shape. MAXP = 3 lease records (max_permits), W = NP waiter slots. NP
 * processes each run one weighted acquire (process p asks for WTp permits)
 * and release the lease they get; with RESIZE, one more process (R, number
 * NP + 1) sets the capacity to RESIZE and, with GROW, back to MAXP. As in
 * shmsem.pml, every critical section is one `atomic` block (the segment
 * lock; lock.pml checks it), and a process may die at every crash point:
 * inside a block after each commit store (CP), just before taking the lock
 * while it owns a record (CBL), and at any time while it waits (DIE). A
 * death inside a block leaves the lock dirty; the next locker runs repair()
 * first. Left out: the lock-free path (HELD_FAST, LOOSE), leaving without
 * the lock (LEFT, LEFT_QUEUED), shutdown (CLOSED), the watcher role and
 * the sleep/wake handshake, which shmsem.pml and fastpath.pml check for
 * leases of one permit (not against a shrink: the gate's RETIRING bit is
 * checked by no model); and the rate limit, checked by none.
 *
 * Build-time parameters (spin -D...):
 *   NP         acquiring processes (2 or 3)
 *   WT1 WT2 WT3  the weight each asks for (default 2, 2, 1)
 *   TIMED      bit p: process p waits with a deadline (default 4: P2)
 *   RESIZE     the capacity R sets (0..3); no R without it
 *   GROW       R then sets the capacity back to MAXP
 *   MAXCRASH   crashes per run (default 1)
 *   CRASHMASK  bit p: process p may die (default all; R is bit NP + 1)
 *   DOUBLE_RELEASE  every release is followed by a second one (-EALREADY)
 *   NO_SHRINK_DROP  settle_capacity() as before 2c9b502: a shrink leaves
 *              the head's reservation alone
 *   CANCEL     a process that waits with a deadline also has a cancel
 *              handle: its canceller thread may run waiter_cancel_remote()
 *   COVER=n    fail where coverage probe n is reached (MODEL.md)
 *   MUT_NO_RETIRE_FIRST, MUT_NO_HOL, MUT_NO_ROLL_FORWARD,
 *   MUT_RELEASE_TOKEN_ONLY, MUT_KEEP_PARTIAL_GRANT, MUT_KEEP_NONHEAD,
 *   MUT_GROW_TO_POOL, MUT_LAZY_SHRINK  mutations that must make the
 *              model fail (MODEL.md)
 */

#define MAXP 3        /* lease records: s->permits, the largest capacity */
#ifndef NP
#define NP 3
#endif
#define W NP          /* waiter slots: one per acquiring process is enough */
#ifndef WT1
#define WT1 2
#endif
#ifndef WT2
#define WT2 2
#endif
#ifndef WT3
#define WT3 1
#endif
#ifndef TIMED
#define TIMED 4       /* bit p: process p may give up (deadline) */
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#ifndef CRASHMASK
#define CRASHMASK 255
#endif
#ifdef RESIZE
#define NPROC (NP + 1)   /* R is process NP + 1 */
#else
#define NPROC NP
#endif

#define WEIGHT(p) ((p) == 1 -> WT1 : ((p) == 2 -> WT2 : WT3))

#define NONE 255  /* kNone */
#define MEMBER 254 /* kMember: rec.slot of a HELD record its token does not name */

/* LeaseState (layout.h) */
#define LFREE 1
#define LHELD 2
#define LRES  3
#define LRET  4   /* RETIRED: above the capacity, nobody's */
/* SlotState (layout.h): the futex word */
#define SFREE 1
#define SWAIT 2
#define SGRANT 3
#define SCANC 4   /* CANCELLED (waiter_cancel_remote) */

/* results */
#define R_GOT      1
#define R_QUEUED   2
#define R_TIMEDOUT 3
#define R_CANCELED 4

/* ---- shared segment ------------------------------------------------------ */
/* lease records */
byte lstate[MAXP];  /* commit word (state and gen: one store in C) */
byte lgen[MAXP];
byte lowner[MAXP];  /* HELD: the owner process; 0 otherwise (never read) */
byte lslot[MAXP];   /* RESERVED: the slot; HELD: MEMBER (one of a weighted
                     * lease's others) or NONE (the token's); else NONE */
byte llink[MAXP];   /* HELD: the next record of the same weighted lease;
                     * RESERVED: the next record of the slot's reservation */
/* waiter slots */
byte sword[W];      /* commit word and futex word */
byte sweight[W];    /* ws.weight */
byte sowner[W];
byte sticket[W];
byte slease[W];     /* ws.lease: the last record reserved for it (chain) */
/* ws.got is not a variable: got_of() counts the records RESERVED for the
 * slot, which is what the cache equals wherever the C code reads it */
/* core: caches of the records, except cap (commit word of set_capacity)
 * and next_ticket */
byte q[W];          /* the queue, oldest first: head = q[0] */
byte qlen;          /* core.waiting */
byte avail;
byte held;
byte reserved;
byte retired;
byte retiring;
byte cap;           /* core.capacity */
byte next_ticket;

/* ---- the world around it -------------------------------------------------- */
bool lock_dirty;    /* the lock word names a holder that died holding it */
byte deadmask;      /* bit p: process p has died */
byte budget;        /* crashes still allowed; init sets it to 0 at any time */
byte finished;      /* processes that have ended (normally or dead) */
/* the lease token {index, gen} each process holds, and (model only) the
 * weight of that lease */
byte tok_l[NPROC + 1];
byte tok_g[NPROC + 1];
byte tok_k[NPROC + 1];
/* model only: the slot each live process waits on (NONE = none) */
byte wslot[NPROC + 1];

#define DEADP(o) ((((deadmask) >> (o)) & 1) == 1)

/* Some record belongs to a dead process: what a reclamation pass finds. */
#define LDEAD(i) (lstate[i] == LHELD && DEADP(lowner[i]))
#define SDEAD(i) (sword[i] != SFREE && DEADP(sowner[i]))
#if W == 2
#define SDEADANY (SDEAD(0) || SDEAD(1))
#elif W == 3
#define SDEADANY (SDEAD(0) || SDEAD(1) || SDEAD(2))
#else
#error "NP must be 2 or 3"
#endif
#define RECL (LDEAD(0) || LDEAD(1) || LDEAD(2) || SDEADANY)

/* ---- dying ------------------------------------------------------------------ */
#define MAYDIE (budget > 0 && ((CRASHMASK >> me) & 1))
#define GONE deadmask = deadmask | (1 << me); goto die
/* inside the lock, after a commit store: the lock stays dirty */
#define CP \
	if \
	:: MAYDIE -> budget--; lock_dirty = true; GONE \
	:: true \
	fi
/* just before taking the lock */
#define CBL \
	if \
	:: MAYDIE -> budget--; GONE \
	:: true \
	fi
/* while waiting (a loop option) */
#define DIE atomic { MAYDIE -> budget--; GONE }

/* Coverage probes: with -DCOVER=n the model fails where probe n is reached
 * (MODEL.md lists them; each must fail in some configuration). */
#ifdef COVER
#define REACH(n) assert(COVER != n)
#else
#define REACH(n) skip
#endif
#define REACHIF(c, n) if :: (c) -> REACH(n) :: else fi

#define LOCK \
	if \
	:: lock_dirty -> repair(); lock_dirty = false \
	:: else \
	fi
#define UNLOCK check_inv()

/* the locals every critical section may use (inlines share them) */
#define LOCALS \
	byte me, i, j, k, l, g, n, m, r, s, t, w, x, nx, pk, fr, fl, fc, d, ht, \
	     chain, taken, mask; \
	bool wa

/* ---- tables.h ---------------------------------------------------------------- */
/* The free lists as the sets of FREE records / slots, lowest index first. */
inline lease_pop(v) {
	v = 0;
	do
	:: v < MAXP && lstate[v] != LFREE -> v++
	:: v < MAXP && lstate[v] == LFREE -> break
	:: v >= MAXP -> v = NONE; break
	od
}

inline slot_pop() {
	s = 0;
	do
	:: s < W && sword[s] != SFREE -> s++
	:: s < W && sword[s] == SFREE -> break
	:: s >= W -> s = NONE; break
	od
}

/* slot_free(): the commit word = FREE; the other fields are forgotten */
inline slot_free(x_) {
	assert(sword[x_] != SFREE);
	sword[x_] = SFREE;
	sowner[x_] = 0; sticket[x_] = 0; sweight[x_] = 0; slease[x_] = NONE
}

inline queue_append(x_) {
	q[qlen] = x_;
	qlen++
}

inline queue_unlink(x_) {
	j = 0;
	do
	:: j < qlen && q[j] != x_ -> j++
	:: else -> break
	od;
	assert(j < qlen);
	do
	:: j + 1 < qlen -> q[j] = q[j + 1]; j++
	:: else -> break
	od;
	qlen--;
	q[qlen] = NONE;
	j = 0
}

/* n = ws.got: the records RESERVED for slot x_ */
inline got_of(x_) {
	n = 0; j = 0;
	do
	:: j < MAXP ->
		if
		:: lstate[j] == LRES && lslot[j] == x_ -> n++
		:: else
		fi;
		j++
	:: else -> break
	od;
	j = 0
}

/* ---- grant.cc: place() ------------------------------------------------------ */
/* Record pl leaves its holder (already out of its counter): retirement while
 * a shrink waits, else the head's reservation while it gathers (granted
 * when it has all), else the pool. Stores in the order of grant.cc; a
 * crash point after each commit. */
inline place(pl) {
	if
#ifndef MUT_NO_RETIRE_FIRST
	:: retiring > 0 ->
		retiring--;
		lstate[pl] = LRET;            /* commit (gen kept) */
		lowner[pl] = 0; lslot[pl] = NONE;
		REACH(1);
		CP;
		retired++
	:: else ->
#else
	:: true ->
#endif
		if
		:: qlen > 0 -> w = q[0]; got_of(w)
		:: else -> w = NONE; n = 0
		fi;
#ifdef MUT_NO_HOL
		/* mutation: no head-of-line blocking; a record that does not
		 * complete the head goes to the first later waiter of weight 1 */
		if
		:: w != NONE && n + 1 < sweight[w] ->
			pk = 1;
			do
			:: pk < qlen && sweight[q[pk]] == 1 -> w = q[pk]; got_of(w); break
			:: pk < qlen && sweight[q[pk]] != 1 -> pk++
			:: else -> break
			od;
			pk = 0
		:: else
		fi;
#endif
		if
		:: w == NONE || n >= sweight[w] ->
			/* a full head waits for its start time: the rate only */
			assert(w == NONE);
			lstate[pl] = LFREE;       /* commit */
			lowner[pl] = 0; lslot[pl] = NONE;
			CP;                       /* RELEASE_FREED */
			avail++
		:: else ->
			assert(sword[w] == SWAIT);
			/* FIFO: only the queued slot with the smallest ticket (the
			 * head) gathers and is granted */
			pk = 0;
			do
			:: pk < qlen -> assert(q[pk] == w || sticket[q[pk]] > sticket[w]); pk++
			:: else -> break
			od;
			lslot[pl] = w;
			llink[pl] = slease[w];
			pk = lgen[pl] + 1;        /* next_gen() */
			lgen[pl] = pk;
			pk = 0;
			lstate[pl] = LRES;        /* commit */
			lowner[pl] = 0;
			CP;                       /* RELEASE_RESERVED */
			reserved++;
			slease[w] = pl;
			n++;                      /* ws.got + 1 */
			if
			:: n < sweight[w] -> REACH(2)  /* the head gathers more */
			:: else ->
				queue_unlink(w);
				sword[w] = SGRANT;    /* commit (CAS WAITING -> GRANTED) */
				REACHIF(sweight[w] == 2, 3);
				CP
			fi
		fi;
		w = 0; n = 0
	fi
}

/* pass_todo(): first and every record linked from it, in order */
inline pass_chain(first) {
	x = first;
	do
	:: x != NONE ->
		nx = llink[x];
		llink[x] = NONE;
		place(x);
		x = nx
	:: else -> break
	od;
	x = 0; nx = 0
}

inline pass_permit(pp) {
	llink[pp] = NONE;
	pass_chain(pp)
}

/* take_reservation(): the chain of slot tw (fr = its first record) out of
 * its reservation; the chain must be exactly the records RESERVED for it
 * (in C a broken chain marks the segment corrupt) */
inline take_reservation(tw) {
	fr = slease[tw]; m = 0; x = fr;
	do
	:: x != NONE ->
		assert(m < MAXP && lstate[x] == LRES && lslot[x] == tw);
		m++;
		x = llink[x]
	:: else -> break
	od;
	got_of(tw);
	assert(m == n);
	n = 0;
	reserved = reserved - m;
	slease[tw] = NONE;
	m = 0; x = 0
}

/* feed_head(): free records to the head while it (or a shrink) wants */
inline feed_head() {
	fc = 0;
	do
	:: fc < MAXP && avail > 0 ->
		if
		:: retiring > 0 -> wa = true
		:: retiring == 0 && qlen > 0 -> got_of(q[0]); wa = (n < sweight[q[0]]); n = 0
		:: else -> wa = false
		fi;
		if
		:: wa ->
			lease_pop(fl);
			assert(fl != NONE);
			avail--;
			pass_permit(fl);
			fc++
		:: else -> break
		fi
	:: else -> break
	od;
	fc = 0; fl = 0; wa = false
}

/* drop_reservation(): what was reserved for slot dw goes on */
inline drop_reservation(dw) {
	take_reservation(dw);
	if
	:: fr != NONE -> pass_chain(fr)
	:: else
	fi;
	fr = 0;
	feed_head()
}

/* finish_slot(): the owner of slot s consumes its grant: the k records
 * become HELD by it, the others first, the one the token names (slease,
 * the last reserved) last; then the slot is freed. */
inline finish_slot() {
	/* FREE or WAITING would be -ENOTRECOVERABLE: our slot reclaimed while
	 * we live (CLOSED is not modelled) */
	assert(sword[s] == SGRANT || sword[s] == SCANC);
	if
	:: sword[s] == SCANC ->
		assert(slease[s] == NONE);    /* dropped when it was cancelled */
		r = R_CANCELED
	:: else ->
		k = sweight[s];
		l = slease[s];
		n = 0; x = l;
		do
		:: x != NONE -> assert(n < k && lstate[x] == LRES && lslot[x] == s); n++; x = llink[x]
		:: else -> break
		od;
		assert(n == k);               /* INV-GRANT: all it asked for */
		n = 0;
		x = llink[l];
		do
		:: x != NONE ->
			lstate[x] = LHELD;        /* owner named, marked, then commit */
			lowner[x] = me; lslot[x] = MEMBER;
			CP;
			x = llink[x]
		:: else -> break
		od;
		lstate[l] = LHELD;            /* commit: the token's record */
		lowner[l] = me; lslot[l] = NONE;
		REACHIF(k == 2, 24);
		CP;                           /* WAIT_CONSUME_COMMITTED */
		held = held + k;
		reserved = reserved - k;
		slease[s] = NONE;
		tok_l[me] = l; tok_g[me] = lgen[l]; tok_k[me] = k;
		r = R_GOT;
		l = 0; k = 0
	fi;
	slot_free(s)                      /* commit */
}

/* ---- waiter.cc ---------------------------------------------------------------- */
/* waiter_start(k): take up to k free records if nobody waits; all k: the
 * lease; fewer: enqueue, and what was taken becomes the reservation. */
inline waiter_start() {
	chain = NONE; taken = 0;
	if
	:: qlen == 0 ->
		do
		:: taken < k ->
			lease_pop(l);
			if
			:: l == NONE -> break
			:: else ->
				/* FIFO: nobody is queued (strict, head-of-line) */
				i = 0;
				do
				:: i < W -> assert(sword[i] != SWAIT); i++
				:: else -> break
				od;
				i = 0;
				pk = lgen[l] + 1;     /* next_gen() */
				lgen[l] = pk;
				pk = 0;
				lstate[l] = LHELD;    /* owner named, then commit */
				lowner[l] = me;
				CP;                   /* ACQUIRE_LEASE_POPPED */
				held++;
				avail--;
				llink[l] = chain;
				lslot[l] = MEMBER;    /* no token names it */
				chain = l;
				taken++
			fi
		:: else -> break
		od
	:: else
	fi;
	if
	:: taken == k ->
		lslot[chain] = NONE;          /* the one the token names */
		tok_l[me] = chain; tok_g[me] = lgen[chain]; tok_k[me] = k;
		r = R_GOT
	:: else ->
		slot_pop();
		assert(s != NONE);            /* W = NP */
		sowner[s] = me;
		sweight[s] = k;
		slease[s] = NONE;
		t = next_ticket;
		next_ticket++;
		sticket[s] = t;
		/* FIFO: tickets follow arrival order */
		i = 0;
		do
		:: i < W -> assert(sword[i] != SWAIT || sticket[i] < t); i++
		:: else -> break
		od;
		i = 0;
		sword[s] = SWAIT;             /* commit */
		wslot[me] = s;
		CP;                           /* ENQUEUE_COMMITTED */
		queue_append(s);
		if
		:: chain != NONE ->
			/* at the head with part of it: its reservation */
			REACH(4);
			held = held - taken;
			pass_chain(chain)
		:: chain == NONE && qlen == 1 -> feed_head()
		:: else
		fi;
		r = R_QUEUED
	fi;
	chain = 0; taken = 0; l = 0
}

/* complete(): abandon (the deadline) while still WAITING, or consume */
inline complete(abandon) {
	if
	:: abandon && sword[s] == SWAIT ->
		REACHIF(slease[s] != NONE && qlen > 1, 5);
		REACHIF(slease[s] != NONE && retiring > 0, 6);
		queue_unlink(s);
		drop_reservation(s);
		slot_free(s);                 /* commit: WAITING -> FREE */
		r = R_TIMEDOUT
	:: else -> finish_slot()
	fi;
	wslot[me] = NONE
}

/* waiter_cancel_remote(): the canceller thread of the same process. The
 * word first (CANCELLED), then the reservation goes on: a crash in between
 * leaves records RESERVED for a CANCELLED slot (orphans for repair). */
inline cancel_remote() {
	if
	:: sword[s] == SWAIT ->           /* (ticket checked: always ours) */
		queue_unlink(s);
		sword[s] = SCANC;             /* commit (CAS WAITING -> CANCELLED) */
		REACHIF(slease[s] != NONE, 27);
		CP;
		drop_reservation(s)
	:: else
	fi
}

/* ---- release.cc ------------------------------------------------------------------ */
inline release_cs() {
	l = tok_l[me]; g = tok_g[me];
#ifdef DOUBLE_RELEASE
	ol = l; og = g;
#endif
	/* a live holder's token is always valid */
	assert(l < MAXP && lstate[l] == LHELD && lgen[l] == g && lowner[l] == me);
	assert(lslot[l] != MEMBER);       /* else -EINVAL: a member's record */
	/* lease_chain(): the records linked from it, HELD by the same owner */
	n = 1; nx = l; x = llink[l];
#ifdef MUT_RELEASE_TOKEN_ONLY
	x = NONE;                         /* mutation: the token's record only */
#endif
	do
	:: x != NONE && n < MAXP && lstate[x] == LHELD && lslot[x] == MEMBER &&
	   lowner[x] == lowner[l] ->
		nx = x; n++; x = llink[x]
	:: else -> break
	od;
	llink[nx] = NONE;
	/* exactly once: the chain is the whole lease, k records */
#ifndef MUT_RELEASE_TOKEN_ONLY
	assert(n == tok_k[me]);
#endif
	REACHIF(n == 2 && retiring > 0, 23);
	held = held - n;
	n = 0; x = 0; nx = 0;
	pass_chain(l);                    /* the token's record first (the commit
	                                   * that spends the token) */
	tok_l[me] = NONE; tok_g[me] = 0; tok_k[me] = 0;
	l = 0; g = 0
}

/* a second release of the spent token {ol, og}: -EALREADY, nothing changes */
inline release_again() {
	REACHIF(lstate[ol] == LRET, 25);
	REACHIF(lstate[ol] == LHELD, 26);
	assert(!(lstate[ol] == LHELD && lgen[ol] == og))
}

/* ---- capacity.cc ------------------------------------------------------------------ */
inline settle_capacity() {
	/* want = MAXP - cap: retired + retiring once settled */
	if
	:: retired + retiring < MAXP - cap ->
		REACHIF(avail > 0, 7);
		REACHIF(avail == 0, 8);
		retiring = MAXP - cap - retired           /* a shrink */
	:: retired + retiring > MAXP - cap ->
		/* a grow: first what was still to retire, then RETIRED records */
		d = retired + retiring - (MAXP - cap);
		if
		:: d <= retiring -> retiring = retiring - d; d = 0; REACH(9)
		:: else -> d = d - retiring; retiring = 0
		fi;
		i = 0;
		do
		:: i < MAXP && d > 0 ->
			if
			:: lstate[i] == LRET ->
				retired--;
#ifndef MUT_GROW_TO_POOL
				pass_permit(i);       /* to the head first */
#else
				lstate[i] = LFREE;    /* mutation: to the pool */
				CP;
				avail++;
#endif
				REACHIF(lstate[i] == LRES, 10);
				REACHIF(lstate[i] == LFREE, 11);
				d--
			:: else
			fi;
			i++
		:: else -> break
		od;
		i = 0
	:: else
	fi;
	/* a shrink takes the free permits at once (place() retires first) */
	i = 0;
	do
#ifndef MUT_LAZY_SHRINK
	:: i < MAXP && retiring > 0 ->
#else
	:: false ->                       /* mutation: only released ones retire */
#endif
		lease_pop(fl);
		if
		:: fl == NONE -> break
		:: else -> avail--; pass_permit(fl); i++
		fi
	:: else -> break
	od;
	i = 0; d = 0; fl = 0;
#ifndef NO_SHRINK_DROP
	/* and the head's reservation, which nobody holds yet: its records
	 * retire first, what is left goes back to it (2c9b502) */
	if
	:: retiring > 0 && qlen > 0 && slease[q[0]] != NONE ->
		ht = q[0];
		REACH(28);
		drop_reservation(ht);
		REACHIF(slease[ht] != NONE, 29);
		ht = 0
	:: else
	fi
#else
	skip
#endif
}

inline set_capacity(cv) {
	cap = cv;                         /* commit */
	CP;                               /* CAPACITY_SET */
	settle_capacity()
}

/* ---- reclaim.cc: reclaim_one() for every dead owner ------------------------------ */
/* Dead waiters first (a queued one is unlinked; its reservation, or a grant
 * it never took, goes on), then dead holders' records, each alone. */
inline reclaim_cs() {
	i = 0;
	do
	:: i < W ->
		if
		:: sword[i] != SFREE && DEADP(sowner[i]) ->
			if
			:: sword[i] == SWAIT -> queue_unlink(i)
			:: else
			fi;
			REACHIF(sword[i] == SWAIT && slease[i] != NONE, 20);
			REACHIF(sword[i] == SGRANT, 21);
			drop_reservation(i);
			slot_free(i);             /* commit */
			CP                        /* RECLAIM_ONE */
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0;
	do
	:: i < MAXP ->
		if
		:: lstate[i] == LHELD && DEADP(lowner[i]) ->
			REACH(22);
			held--;
			pass_permit(i)            /* commit inside */
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0
}

/* ---- recovery.cc: repair() ---------------------------------------------------------- */
/* The records RESERVED for slot ow (its chain, rebuilt in step 1) go FREE. */
inline orphan_reservation(ow) {
	x = slease[ow];
	do
	:: x != NONE ->
		nx = llink[x];
		lstate[x] = LFREE;            /* commit */
		llink[x] = NONE; lslot[x] = NONE;
		CP;
		x = nx
	:: else -> break
	od;
	slease[ow] = NONE;
	x = 0; nx = 0
}

inline repair() {
	/* 1. reservations from the records: a RESERVED record whose slot is
	 * not WAITING or GRANTED is an orphan */
	i = 0;
	do
	:: i < W -> slease[i] = NONE; i++
	:: else -> break
	od;
	i = MAXP;
	do
	:: i > 0 ->
		i--;
		if
		:: lstate[i] == LRES ->
			w = lslot[i];
			if
			:: w < W && (sword[w] == SWAIT || sword[w] == SGRANT) ->
				llink[i] = slease[w];
				slease[w] = i
			:: else ->
				lstate[i] = LFREE;    /* orphan (commit) */
				llink[i] = NONE; lslot[i] = NONE;
				REACH(12);
				CP
			fi;
			w = 0
		:: else
		fi
	:: else -> break
	od;
	/* the head: the WAITING slot with the smallest ticket */
	ht = 255;
	i = 0;
	do
	:: i < W ->
		if
		:: sword[i] == SWAIT && sticket[i] < ht -> ht = sticket[i]
		:: else
		fi;
		i++
	:: else -> break
	od;
	/* 2. each slot against its reservation */
	i = 0;
	do
	:: i < W ->
		got_of(i);
		if
		:: sword[i] == SGRANT ->
			/* all of it, or nothing (consumed); a part: the consumer died
			 * between the records it made HELD, the rest go back */
			if
#ifndef MUT_KEEP_PARTIAL_GRANT
			:: n != sweight[i] && n != 0 -> REACH(13); orphan_reservation(i); n = 0
#endif
			:: else
			fi;
			if
			:: n == 0 ->
				REACH(14);
				slot_free(i);         /* consumed: GRANTED -> FREE (CAS) */
				CP
			:: else
			fi
#ifndef MUT_KEEP_NONHEAD
		:: sword[i] == SWAIT && n > 0 && (sticket[i] != ht || n > sweight[i]) ->
#else
		:: sword[i] == SWAIT && n > 0 && n > sweight[i] ->
#endif
			REACH(15);
			orphan_reservation(i)     /* not the head's */
		:: sword[i] == SCANC && n > 0 ->
			orphan_reservation(i)     /* dropped when it was cancelled */
		:: sword[i] == SWAIT && n > 0 && sticket[i] == ht && n == sweight[i] ->
#ifndef MUT_NO_ROLL_FORWARD
			/* cut short between its last reservation and GRANTED */
			sword[i] = SGRANT;        /* roll forward (CAS) */
			REACHIF(sweight[i] == 2, 16);
			CP
#else
			skip
#endif
		:: else
		fi;
		n = 0;
		i++
	:: else -> break
	od;
	ht = 0;
	/* 3. counters from the record states */
	avail = 0; held = 0; reserved = 0; retired = 0;
	i = 0;
	do
	:: i < MAXP ->
		if
		:: lstate[i] == LHELD -> held++
		:: lstate[i] == LRES -> reserved++
		:: lstate[i] == LRET -> retired++
		:: lstate[i] == LFREE -> avail++
		fi;
		i++
	:: else -> break
	od;
	retiring = 0;                     /* settled in step 5 */
	/* the queue: the WAITING slots sorted by ticket; next_ticket above all */
	mask = 0;
	i = 0;
	do
	:: i < W ->
		q[i] = NONE;
		if
		:: sword[i] == SWAIT -> mask = mask | (1 << i)
		:: else
		fi;
		if
		:: sword[i] != SFREE && next_ticket <= sticket[i] -> next_ticket = sticket[i] + 1
		:: else
		fi;
		i++
	:: else -> break
	od;
	qlen = 0;
	do
	:: true ->
		w = NONE; pk = 255;
		i = 0;
		do
		:: i < W ->
			if
			:: ((mask >> i) & 1) && sticket[i] < pk -> w = i; pk = sticket[i]
			:: else
			fi;
			i++
		:: else -> break
		od;
		if
		:: w == NONE -> break
		:: else -> mask = mask & ~(1 << w); queue_append(w)
		fi
	od;
	w = 0; pk = 0; i = 0;
	/* 5. a resize cut short is finished; free permits to the head */
	REACHIF(retired < MAXP - cap && avail > 0, 17);
	REACHIF(retired > MAXP - cap, 18);
	settle_capacity();
	REACHIF(avail > 0 && qlen > 0, 19);
	feed_head()
}

/* ---- the invariants, at every unlock ------------------------------------------ */
inline check_inv() {
	/* records: FREE (fc), HELD (fl), RESERVED (fr), RETIRED (d) */
	fc = 0; fl = 0; fr = 0; d = 0;
	i = 0;
	do
	:: i < MAXP ->
		if
		:: lstate[i] == LFREE -> fc++; assert(llink[i] == NONE)
		:: lstate[i] == LHELD -> fl++
		:: lstate[i] == LRES ->
			fr++;
			/* no RESERVED record but for a GRANTED slot or the head */
			w = lslot[i];
			assert(w < W && (sword[w] == SGRANT ||
			                 (sword[w] == SWAIT && qlen > 0 && q[0] == w)));
			w = 0
		:: lstate[i] == LRET -> d++; assert(llink[i] == NONE)
		:: else -> assert(false)
		fi;
		i++
	:: else -> break
	od;
	/* INV-PERMITS */
	assert(fc + fl + fr + d == MAXP);
	assert(fc == avail && fl == held && fr == reserved && d == retired);
	/* INV-CAPACITY: capacity + retired + retiring = max; nothing free
	 * while a shrink waits */
	assert(cap <= MAXP && cap + retired + retiring == MAXP);
	assert(retiring == 0 || fc == 0);
	/* INV-NOBYPASS (no rate): nothing free while anyone waits */
	assert(qlen == 0 || fc == 0);
	/* INV-RESERVE, INV-GRANT: each slot's chain is exactly its records,
	 * all k if GRANTED, fewer (and only at the head) if WAITING */
	m = 0;
	i = 0;
	do
	:: i < W ->
		x = slease[i]; t = 0;
		do
		:: x != NONE -> assert(t < MAXP && lstate[x] == LRES && lslot[x] == i); t++; x = llink[x]
		:: else -> break
		od;
		got_of(i);
		assert(t == n);
		if
		:: sword[i] == SFREE -> assert(n == 0)
		:: sword[i] == SGRANT -> assert(n == sweight[i])
		:: sword[i] == SCANC -> assert(n == 0)
		:: sword[i] == SWAIT ->
			assert(n < sweight[i] && (n == 0 || q[0] == i));
#ifndef NO_SHRINK_DROP
			/* a shrink takes the head's reservation back at once, and
			 * nothing is reserved while one waits */
			assert(retiring == 0 || n == 0);
#endif
			assert(sticket[i] < next_ticket);
			m++
		:: else -> assert(false)
		fi;
		/* a live owner's slot is the one it waits on */
		if
		:: sword[i] != SFREE && !DEADP(sowner[i]) -> assert(wslot[sowner[i]] == i)
		:: else
		fi;
		n = 0; t = 0; x = 0;
		i++
	:: else -> break
	od;
	/* INV-QUEUE: exactly the WAITING slots, in increasing ticket order */
	assert(m == qlen);
	i = 0;
	do
	:: i < qlen ->
		assert(sword[q[i]] == SWAIT);
		assert(i == 0 || sticket[q[i - 1]] < sticket[q[i]]);
		i++
	:: else -> break
	od;
	/* INV-ATTRIB and no over-grant (model only): a live process's token
	 * names a lease of exactly its k records, HELD by it; every other HELD
	 * record is a dead owner's (reclamation will take it). So the held
	 * weights of the live holders plus the dead owners' records are
	 * `held` <= capacity + retiring. */
	m = 0;                            /* HELD records accounted for */
	i = 1;
	do
	:: i <= NPROC ->
		if
		:: tok_l[i] != NONE && !DEADP(i) ->
			assert(tok_l[i] < MAXP && lgen[tok_l[i]] == tok_g[i]);
			x = tok_l[i]; t = 0;
			assert(lslot[x] != MEMBER);
			do
			:: x != NONE ->
				assert(t < MAXP && lstate[x] == LHELD && lowner[x] == i &&
				       (t == 0 || lslot[x] == MEMBER));
				t++; x = llink[x]
			:: else -> break
			od;
			assert(t == tok_k[i]);
			m = m + t
		:: else
		fi;
		if
		:: wslot[i] != NONE && !DEADP(i) ->
			assert(wslot[i] < W && sowner[wslot[i]] == i && sword[wslot[i]] != SFREE)
		:: else
		fi;
		t = 0; x = 0;
		i++
	:: else -> break
	od;
	i = 0;
	do
	:: i < MAXP ->
		if
		:: lstate[i] == LHELD && DEADP(lowner[i]) -> m++
		:: else
		fi;
		i++
	:: else -> break
	od;
	assert(m == held);
	assert(held <= cap + retiring);
	i = 0; m = 0; fc = 0; fl = 0; fr = 0; d = 0
}

/* ---- one acquiring process -------------------------------------------------------- */
proctype P(byte id) {
	LOCALS;
	byte kind;
	bool cancelled;
#ifdef DOUBLE_RELEASE
	byte ol, og;
#endif
	/* (no crash point before the first section: it owns nothing yet) */
	atomic {
		me = id;
		k = WEIGHT(me);
		kind = (TIMED >> me) & 1;    /* 1: waits with a deadline */
		LOCK; waiter_start(); UNLOCK;
		k = 0
	};
	if
	:: r == R_QUEUED ->
		do
		:: atomic { sword[s] != SWAIT ->      /* granted: waiter_poll() */
		            LOCK; complete(false); UNLOCK };
		   break
		:: atomic { kind && sword[s] == SWAIT -> /* the deadline */
		            LOCK; complete(true); UNLOCK };
		   break
		:: atomic { sword[s] == SWAIT && (RECL || lock_dirty) ->
		            /* a watch step: reclaim() always takes the lock */
		            LOCK; reclaim_cs(); UNLOCK }
#ifdef CANCEL
		:: atomic { kind && !cancelled && sword[s] == SWAIT ->
		            /* the canceller thread: cancel_fire() */
		            cancelled = true; LOCK; cancel_remote(); UNLOCK }
#endif
		:: DIE
		od;
		s = 0; t = 0; cancelled = false
	:: else
	fi;
	if
	:: r == R_GOT ->
		atomic { CBL; LOCK; release_cs(); UNLOCK };
#ifdef DOUBLE_RELEASE
		atomic { LOCK; release_again(); UNLOCK; ol = 0; og = 0 };
#endif
		skip
	:: else
	fi;
	r = 0; kind = 0;
	goto gone;
die:
	atomic {
		tok_l[me] = NONE; tok_g[me] = 0; tok_k[me] = 0; wslot[me] = NONE;
		i = 0; j = 0; k = 0; l = 0; g = 0; n = 0; m = 0; r = 0; s = 0; t = 0;
		w = 0; x = 0; nx = 0; pk = 0; fr = 0; fl = 0; fc = 0; d = 0; ht = 0;
		chain = 0; taken = 0; mask = 0; wa = false; kind = 0; cancelled = false;
#ifdef DOUBLE_RELEASE
		ol = 0; og = 0;
#endif
	};
gone:
	finished++
}

#ifdef RESIZE
/* shmsem_set_permits(): shrink, then (GROW) back to the maximum */
proctype R() {
	LOCALS;
	atomic { me = NP + 1; LOCK; set_capacity(RESIZE); UNLOCK };
#ifdef GROW
	atomic { LOCK; set_capacity(MAXP); UNLOCK };
#endif
	goto gone;
die:
	atomic {
		i = 0; j = 0; k = 0; l = 0; g = 0; n = 0; m = 0; r = 0; s = 0; t = 0;
		w = 0; x = 0; nx = 0; pk = 0; fr = 0; fl = 0; fc = 0; d = 0; ht = 0;
		chain = 0; taken = 0; mask = 0; wa = false
	};
gone:
	finished++
}
#endif

/* After every process has ended: one last reclamation pass (repair first
 * if the lock is dirty), then no permit may be lost: every record FREE or
 * RETIRED, as many FREE as the capacity, no slot in use. */
proctype Final() {
	LOCALS;
	me = 0;
	atomic {
		LOCK; reclaim_cs(); UNLOCK;
		assert(qlen == 0 && held == 0 && reserved == 0 && retiring == 0);
		assert(avail == cap && retired == MAXP - cap);
		i = 0;
		do
		:: i < MAXP -> assert(lstate[i] == LFREE || lstate[i] == LRET); i++
		:: else -> break
		od;
		i = 0;
		do
		:: i < W -> assert(sword[i] == SFREE); i++
		:: else -> break
		od;
		i = 0
	};
	goto done;
die:                                  /* (CP needs it; budget is 0 here) */
	skip;
done:
	skip
}

init {
	byte c;
	atomic {
		c = 0;
		do
		:: c < MAXP -> lstate[c] = LFREE; lslot[c] = NONE; llink[c] = NONE; c++
		:: else -> break
		od;
		c = 0;
		do
		:: c < W -> sword[c] = SFREE; slease[c] = NONE; q[c] = NONE; c++
		:: else -> break
		od;
		c = 0;
		do
		:: c <= NPROC -> tok_l[c] = NONE; wslot[c] = NONE; c++
		:: else -> break
		od;
		avail = MAXP;
		cap = MAXP;
		next_ticket = 1;
		budget = MAXCRASH;
		c = 1;
		do
		:: c <= NP -> run P(c); c++
		:: else -> break
		od;
#ifdef RESIZE
		run R();
#endif
		c = 0
	};
	/* the crash window closes at an arbitrary moment (see shmsem.pml) */
	budget = 0;
	finished == NPROC;
	run Final()
}
