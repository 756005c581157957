//! Broker-wide facts that are exact only on a broker with no topics. These run first, so against
//! the fresh sim (or a freshly started real broker) the exact branch runs; against a live broker
//! that already has topics the case checks the half that still holds and says so.

use super::super::*;

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "metadata_empty_placeholder_only_without_topics",
            section: "3.2",
            run: empty_placeholder,
        },
        Case {
            name: "describe_cluster_counts_fresh_or_consistent",
            section: "3.15",
            run: cluster_counts,
        },
    ]
}

fn assert_placeholder(md: &MetadataResp) -> CaseResult {
    ensure_eq!(
        md.topics.len(),
        1,
        "topics in an all-topics answer of a broker without topics"
    );
    let t = &md.topics[0];
    ensure_eq!(t.name.as_deref(), Some("__empty__"), "placeholder name");
    ensure_eq!(t.error, 0, "placeholder errorCode");
    ensure_eq!(t.internal, 1, "placeholder isInternal");
    ensure_eq!(t.auth_ops, 0, "placeholder topicAuthorizedOperations");
    ensure_eq!(
        t.partitions,
        vec![PartMd {
            error: 0,
            partition: 0,
            leader: 0,
            epoch: 0,
            replicas: vec![0],
            isr: vec![0],
            offline: vec![],
        }],
        "placeholder partitions"
    );
    Ok(())
}

fn empty_placeholder(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    // Asking for "__empty__" by name is an unknown topic like any other, fresh broker or not.
    assert_topic_unknown(&mut c, "__empty__")?;

    let md = metadata(&mut c, &[])?;
    let fresh = md.topics.len() == 1 && md.topics[0].name.as_deref() == Some("__empty__");
    if !fresh {
        ctx.note("broker already has topics: checked that no placeholder is listed");
        ensure!(
            md.topics
                .iter()
                .all(|t| t.name.as_deref() != Some("__empty__")),
            "__empty__ listed although the broker has topics"
        );
        ensure!(
            md.topics.iter().all(|t| t.internal == 0 && t.error == 0),
            "real topics must have isInternal 0 and errorCode 0"
        );
        return Ok(());
    }
    ctx.note("fresh broker: exact placeholder checked, gone with a topic, back after delete");
    assert_placeholder(&md)?;
    // Negative count behaves like the empty list (§1.4): placeholder too.
    let r = c.call(METADATA, &metadata_req_count(-1, 0))?;
    assert_placeholder(&parse_metadata(&r)?)?;

    let t = ctx.name("t");
    create_topic(&mut c, &t, 1)?;
    let md = metadata(&mut c, &[])?;
    let names: Vec<_> = md.topics.iter().map(|t| t.name.clone()).collect();
    ensure_eq!(
        names,
        vec![Some(t.clone())],
        "all-topics answer with one topic"
    );
    delete_topic(&mut c, &t)?;
    assert_placeholder(&metadata(&mut c, &[])?)?;
    Ok(())
}

fn cluster_counts(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let md = metadata(&mut c, &[])?;
    let fresh = md.topics.len() == 1 && md.topics[0].name.as_deref() == Some("__empty__");
    let r = c.call(DESCRIBE_CLUSTER, &minimal_api_versions_req())?;
    r.expect_ok_body(0)?;
    let d = parse_cluster(&r)?;
    if fresh {
        ctx.note("fresh broker: exact {0, stellflow-dev-cluster, 1, 0, 0}");
        ensure_eq!(
            d,
            ClusterResp {
                error: 0,
                cluster_id: Some("stellflow-dev-cluster".into()),
                brokers: 1,
                topics: 0,
                partitions: 0,
            },
            "DescribeCluster on a broker without topics (placeholder not counted)"
        );
    } else {
        ctx.note("broker has topics: counts compared with Metadata");
        let parts: usize = md.topics.iter().map(|t| t.partitions.len()).sum();
        ensure_eq!(d.error, 0, "DescribeCluster errorCode");
        ensure_eq!(
            d.cluster_id.as_deref(),
            Some("stellflow-dev-cluster"),
            "DescribeCluster clusterId"
        );
        ensure_eq!(d.brokers, 1, "brokerCount on a single node");
        ensure_eq!(d.topics as usize, md.topics.len(), "topicCount vs Metadata");
        ensure_eq!(d.partitions as usize, parts, "partitionCount vs Metadata");
    }
    Ok(())
}
